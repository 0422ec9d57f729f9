package commands

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/editdistance"
	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
)

func filterFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "server", Usage: "only these `SERVER`s (repeatable or comma-separated)"},
		&cli.StringSliceFlag{Name: "tool", Usage: "only these `TOOL`s"},
		&cli.StringSliceFlag{Name: "status", Usage: "ok or error"},
		&cli.StringSliceFlag{Name: "error-class", Usage: "network, timeout, http, jsonrpc, tool_error, session_terminated, auth, proxy_policy, proxy_internal, cancelled"},
		&cli.StringSliceFlag{Name: "fault-domain", Usage: "upstream, proxy or client"},
		&cli.StringSliceFlag{Name: "replica", Usage: "only calls made by these proxyd `REPLICA`s (when several share the state)"},
		&cli.StringFlag{Name: "since", Usage: "from `WHEN`: a duration ago (1h, 30m, 7d), or a time (RFC 3339 with or without offset, or as tables print it)"},
		&cli.StringFlag{Name: "until", Usage: "up to `WHEN`: as --since, or +DURATION from now (follow)"},
	}
}

var activityCommand = &cli.Command{
	Name:  "activity",
	Usage: "what failed, when, and whose fault: the classified call log",
	Description: `Every tool call through proxyd is recorded with its status, error class,
fault domain (upstream, proxy or client) and upstream HTTP status.
Without a subcommand, lists records newest first.

Examples:
   mcpx activity --fault-domain upstream --since 1h
   mcpx activity --error-class http,timeout --server docs -o json
   mcpx activity show 42          (or: mcpx activity 42)
   mcpx activity follow --status error
   mcpx activity export --format csv --since 24h > calls.csv
   mcpx activity summary --since 24h --by class
   mcpx activity --replica proxyd-0 --status error   # one replica of several`,
	ArgsUsage: "[ID]",
	Flags:     append(filterFlags(), outputFlag, &cli.IntFlag{Name: "limit", Value: 50, Usage: "at most `N` records (0: all)", Action: nonNegativeLimit}),
	Action:    runActivityList,
	Subcommands: []*cli.Command{
		{
			Name:   "list",
			Usage:  "list records, newest first",
			Flags:  append(filterFlags(), outputFlag, &cli.IntFlag{Name: "limit", Value: 50, Usage: "at most `N` records (0: all)", Action: nonNegativeLimit}),
			Action: runActivityList,
		},
		{
			Name:      "show",
			Usage:     "every field of one record, with the classification's reason",
			ArgsUsage: "ID",
			Flags:     []cli.Flag{outputFlag},
			Action:    runActivityShow,
		},
		{
			Name:  "follow",
			Usage: "print records live as calls complete (Ctrl-C to stop)",
			Description: `Prints each call's record as it completes, until Ctrl-C or --until:
the calls of the proxyd you ask (with several replicas, its own).
When proxyd stops, the follow exits 3 and says so; with --retry it waits
for proxyd to answer again and goes on, first printing from the record
the calls it ended in between (each record once).

Examples:
   mcpx activity follow --status error
   mcpx activity follow --fault-domain upstream -o json --retry`,
			Flags: append(filterFlags(), outputFlag,
				&cli.BoolFlag{Name: "retry", Usage: "when proxyd stops, wait for it and go on following"}),
			Action: runActivityFollow,
		},
		{
			Name:  "export",
			Usage: "stream every matching record as JSON lines or CSV",
			Flags: append(filterFlags(), &cli.StringFlag{Name: "output", Aliases: []string{"o", "format"}, Value: "json",
				Usage: "`FORMAT`: json (JSON lines), csv, yaml (a document per record) or table"}),
			Action: runActivityExport,
		},
		{
			Name:  "summary",
			Usage: "counts and failure rates grouped by server, tool, error class or fault domain",
			Description: `Counts calls and failures per group; in the table each group also gets
calls and failures per time bucket over the window as sparklines and a
latency histogram with p50, p90 and p99 marked (--charts=false: the table
alone; with -o json or yaml, --charts adds the charts' data to each row).

Examples:
   mcpx activity summary --since 24h
   mcpx activity summary --since 1h --by class
   mcpx activity summary --by domain --server docs -o json --charts`,
			Flags: append(filterFlags(), outputFlag,
				&cli.StringFlag{Name: "by", Value: "server", Usage: "group by `FIELD`: server, tool, class (error class), domain (fault domain) or replica"},
				&cli.BoolFlag{Name: "charts", Value: true, Usage: "draw sparklines and latency histograms (table); add their data (json, yaml)"}),
			Action: runActivitySummary,
		},
	},
}

// activityQuery validates the filter flags and turns them into the
// daemon's query.
func activityQuery(c *cli.Context, now time.Time) (api.ActivityQuery, error) {
	var q api.ActivityQuery
	lists := []struct {
		flag  string
		into  *[]string
		vocab []string
	}{
		{"server", &q.Servers, nil},
		{"tool", &q.Tools, nil},
		{"status", &q.Statuses, api.CallStatuses},
		{"error-class", &q.ErrorClasses, callerr.Classes},
		{"fault-domain", &q.FaultDomains, callerr.Domains},
		{"replica", &q.Replicas, nil},
	}
	for _, l := range lists {
		if !c.IsSet(l.flag) {
			continue
		}
		for _, v := range api.SplitList(c.StringSlice(l.flag)) {
			if l.vocab != nil && !slices.Contains(l.vocab, v) {
				return q, usageErr("--%s %q is not one of: %s", l.flag, v, strings.Join(l.vocab, ", "))
			}
			*l.into = append(*l.into, v)
		}
	}
	for _, t := range []struct {
		flag string
		into *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if v := c.String(t.flag); v != "" {
			when, err := parseWhen(v, now)
			if err != nil {
				return q, usageErr("--%s: %v", t.flag, err)
			}
			*t.into = when
		}
	}
	return q, nil
}

func runActivityList(c *cli.Context) error {
	if c.NArg() == 1 && c.Command.Name == "activity" {
		if _, err := strconv.ParseInt(c.Args().First(), 10, 64); err == nil {
			return runActivityShow(c) // 'mcpx activity ID' is 'mcpx activity show ID'
		}
	}
	if c.NArg() > 0 {
		return usageErr("unknown activity subcommand %q (list, show, follow, export, summary)%s", c.Args().First(),
			editdistance.DidYouMean(c.Args().First(), []string{"list", "show", "follow", "export", "summary"}))
	}
	if _, err := format(c); err != nil {
		return err
	}
	q, err := activityQuery(c, time.Now())
	if err != nil {
		return err
	}
	filtered := q.Values()
	q.Limit = c.Int("limit")
	recs, err := newClient(c).Activity(c.Context, q)
	if err != nil {
		err = fromRecord(c, err, func(r *proxyd.Record) (err error) {
			recs, err = r.Activity(c.Context, q)
			return err
		})
	}
	if err != nil {
		return err
	}
	on := colorEnabled(c)
	return render(c, recs, func(w io.Writer) error {
		if len(recs) == 0 {
			if len(filtered) > 0 {
				emptyNote(w, "No calls match these filters.")
			} else {
				emptyNote(w, "No calls recorded yet.")
			}
			return nil
		}
		t := newTable(w, "ID", "TIME", "SERVER", "TOOL", "STATUS", "CLASS", "DOMAIN", "HTTP", "DURATION")
		var colors []string
		for _, r := range recs {
			_ = t.Append(activityRow(r))
			colors = append(colors, domainColor(r.FaultDomain))
		}
		if on {
			t.ColorRows(colors)
		}
		return t.Render()
	})
}

// domainColor colours a failure by whose fault it was; the DOMAIN column
// says the same in words.
func domainColor(domain string) string {
	switch domain {
	case callerr.DomainUpstream:
		return red
	case callerr.DomainProxy:
		return yellow
	case callerr.DomainClient:
		return cyan
	}
	return ""
}

func activityRow(r api.ActivityRecord) []string {
	httpStatus := "-"
	if r.UpstreamHTTPStatus != 0 {
		httpStatus = strconv.Itoa(r.UpstreamHTTPStatus)
	}
	return []string{
		strconv.FormatInt(r.ID, 10),
		tableTime(r.Time),
		shown(r.Server), shown(r.Tool), r.Status,
		dash(r.ErrorClass), dash(r.FaultDomain), httpStatus,
		fmt.Sprintf("%.1fms", r.DurationMS),
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runActivityShow(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErr("activity show needs one record ID")
	}
	id, err := strconv.ParseInt(c.Args().First(), 10, 64)
	if err != nil {
		return usageErr("record ID %q is not a number", c.Args().First())
	}
	if _, err := format(c); err != nil {
		return err
	}
	r, err := newClient(c).ActivityRecord(c.Context, id)
	if err != nil {
		err = fromRecord(c, err, func(rec *proxyd.Record) (err error) {
			r, err = rec.ActivityRecord(c.Context, id)
			return err
		})
	}
	if err != nil {
		return err
	}
	return render(c, r, func(w io.Writer) error {
		row := func(k, v string) {
			if v = shown(v); v != "" {
				fmt.Fprintf(w, "%-22s %s\n", k+":", v)
			}
		}
		row("id", strconv.FormatInt(r.ID, 10))
		row("time", tableTime(r.Time))
		row("server", r.Server)
		row("tool", r.Tool)
		row("status", r.Status)
		row("duration", fmt.Sprintf("%.3f ms", r.DurationMS))
		row("error class", r.ErrorClass)
		row("fault domain", r.FaultDomain)
		if r.UpstreamHTTPStatus != 0 {
			row("upstream http status", strconv.Itoa(r.UpstreamHTTPStatus))
		}
		row("reason", r.Reason)
		if e := strings.TrimSpace(redact.Control(r.Error)); e != "" {
			// Upstream error bodies span lines: keep them under the label.
			row("error", strings.ReplaceAll(e, "\n", "\n"+strings.Repeat(" ", 23)))
		}
		row("request id", r.RequestID)
		row("client", r.Client)
		row("replica", r.Replica)
		row("protocol era", r.ProtocolEra)
		row("session re-init", yesNo(r.Reinit))
		row("retried", yesNo(r.Retried))
		row("token refresh", yesNo(r.TokenRefresh))
		if r.Progress > 0 {
			row("progress", strconv.Itoa(r.Progress)+" notifications")
		}
		if r.Inputs != "" {
			row("input requests", redact.Control(r.Inputs))
		}
		return nil
	})
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func runActivityFollow(c *cli.Context) error {
	f, err := format(c)
	if err != nil {
		return err
	}
	q, err := activityQuery(c, time.Now())
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// --until ends the follow at that time; one already past is a mistake.
	if !q.Until.IsZero() {
		if !q.Until.After(time.Now()) {
			return usageErr("--until %s is not in the future: follow prints records as they come (give a time ahead, e.g. --until +10m)", c.String("until"))
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, q.Until)
		defer cancel()
		q.Until = time.Time{}
	}
	if f == "table" {
		errorf(c, "following activity (Ctrl-C to stop)\n")
	}
	on, tsv := colorEnabled(c), tsvOutput(c)
	w := c.App.Writer
	show := func(r api.ActivityRecord) error {
		switch f {
		case "json":
			b, err := machineJSON(r)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%s\n", b)
		case "yaml":
			b, err := toYAML(r)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "---\n%s", b)
		default:
			if tsv {
				// As the list's TSV: tab-separated, uncoloured.
				fmt.Fprintln(w, strings.Join(tsvRow(shownRow(activityRow(r))), "\t"))
				return nil
			}
			fmt.Fprintln(w, color(on && domainColor(r.FaultDomain) != "", domainColor(r.FaultDomain), strings.Join(activityRow(r), "  ")))
		}
		return nil
	}
	cl := newClient(c)
	fl := &follower{cl: cl, q: q, since: time.Now(), show: show}
	// A follow streams its own proxyd's calls: a --replica naming only
	// others would wait for nothing.
	if len(q.Replicas) > 0 {
		own := replicaOf(ctx, cl)
		if own != "" && !slices.Contains(q.Replicas, own) {
			list := strings.Join(q.Replicas, ",")
			return usageErr("--replica %s: this proxyd is replica %s, and a follow streams its own calls (follow through the proxyd of %s, or read the record with 'mcpx activity --replica %s')", list, own, list, list)
		}
		fl.known = &own // the first stream's, asked already
	}
	for {
		began := time.Now()
		err := fl.follow(ctx)
		if ctx.Err() != nil {
			return nil // Ctrl-C or --until
		}
		if !c.Bool("retry") {
			if errors.Is(err, io.EOF) {
				// proxyd ends a follow only when it stops: not the end of
				// what was asked for, which a script must be able to tell.
				return exitErr(ExitProxydNotRunning, errors.New("proxyd ended the stream: it stopped or is restarting (follow again once 'mcpx status' answers, or follow with --retry; 'mcpx activity --since TIME' lists the calls in between)"))
			}
			return daemonErr(err)
		}
		if !errors.Is(err, io.EOF) && !api.IsNotRunning(err) && !fl.followed {
			return daemonErr(err) // not a stop: a refusal (a bad filter, say)
		}
		switch {
		case !fl.followed:
			errorf(c, "proxyd is not running; waiting for it to answer (Ctrl-C to stop)\n")
		case errors.Is(err, io.EOF) || api.IsNotRunning(err):
			errorf(c, "proxyd stopped; waiting for it to answer again (Ctrl-C to stop)\n")
		default:
			errorf(c, "the stream from proxyd broke (%v); waiting for proxyd to answer again (Ctrl-C to stop)\n", err)
		}
		// A proxyd that answers but fails the follow at once is not
		// asked again in a tight loop.
		if err := sleepCtx(ctx, time.Until(began.Add(time.Second))); err != nil {
			return nil
		}
		if awaitProxyd(ctx, cl.Status, time.Time{}) != nil {
			return nil // only ctx ends a wait without a deadline
		}
		if fl.followed {
			errorf(c, "proxyd answers again; following (first the calls that ended in between)\n")
		} else {
			errorf(c, "proxyd answers; following\n")
		}
	}
}

// follower prints a follow's records once each, across restarts of proxyd.
type follower struct {
	cl       *api.Client
	q        api.ActivityQuery
	since    time.Time // when the follow began
	show     func(api.ActivityRecord) error
	last     int64 // the newest record shown
	followed bool  // a stream has been open
	// replicas are the ids of the proxyd followed so far: a live stream
	// carries its own proxyd's calls, so the record read after a restart
	// takes only theirs. Others sharing a PostgreSQL record are not
	// followed, and their ids can commit out of order with these.
	replicas []string
	// known is the replica of the proxyd the next stream opens on, when
	// already asked (the --replica check); each later stream asks again,
	// as a restart may bring another proxyd.
	known *string
}

// follow streams records until the stream ends. Once one has ended, the
// next opens the live stream first and then shows from the record what
// ended in between (ids only grow, so after the last shown; or, none
// shown yet, since the follow began), the live stream's copies skipped.
func (fl *follower) follow(ctx context.Context) error {
	own := ""
	if fl.known != nil {
		own, fl.known = *fl.known, nil
	} else {
		own = replicaOf(ctx, fl.cl)
	}
	if own != "" && !slices.Contains(fl.replicas, own) {
		fl.replicas = append(fl.replicas, own)
	}
	st, err := fl.cl.FollowActivity(ctx, fl.q)
	if err != nil {
		return err
	}
	defer st.Close()
	emit := func(r api.ActivityRecord) error {
		if r.ID != 0 && r.ID <= fl.last {
			return nil
		}
		fl.last = max(fl.last, r.ID)
		return fl.show(r)
	}
	if gap, ok := fl.gap(); ok {
		if err := streamEach(fl.cl.ExportActivity(ctx, gap))(emit); err != nil {
			return err
		}
	}
	fl.followed = true
	for {
		r, err := st.Next()
		if err != nil {
			return err
		}
		if err := emit(r); err != nil {
			return err
		}
	}
}

// gap is the record read that fills what ended while no stream was open:
// after the last record shown (or since the follow began), of the
// followed proxyd's replicas the query asked for; false when there is
// nothing to read (no stream yet, or none of those replicas asked for).
func (fl *follower) gap() (api.ActivityQuery, bool) {
	if !fl.followed {
		return api.ActivityQuery{}, false
	}
	gap := fl.q
	gap.After = fl.last
	if fl.last == 0 {
		gap.Since = fl.since
	}
	if len(fl.replicas) > 0 {
		gap.Replicas = nil
		for _, r := range fl.replicas {
			if len(fl.q.Replicas) == 0 || slices.Contains(fl.q.Replicas, r) {
				gap.Replicas = append(gap.Replicas, r)
			}
		}
		if len(gap.Replicas) == 0 {
			return gap, false
		}
	}
	return gap, true
}

func runActivityExport(c *cli.Context) error {
	fmtName := strings.ToLower(c.String("output"))
	if fmtName == "jsonl" {
		fmtName = "json"
	}
	if !slices.Contains([]string{"json", "csv", "yaml", "table"}, fmtName) {
		return usageErr("-o %q: use json (JSON lines), csv, yaml or table", c.String("output"))
	}
	q, err := activityQuery(c, time.Now())
	if err != nil {
		return err
	}
	w := c.App.Writer
	var cw *csv.Writer
	if fmtName == "csv" {
		cw = csv.NewWriter(w)
		_ = cw.Write([]string{"id", "time", "server", "tool", "status", "duration_ms", "error_class", "fault_domain", "upstream_http_status", "request_id", "client", "protocol_era", "reinit", "retried", "token_refresh", "reason", "error", "replica", "method"})
	}
	write := func(r api.ActivityRecord) error {
		switch fmtName {
		case "json":
			b, err := machineJSON(r)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(w, "%s\n", b)
			return err
		case "yaml":
			b, err := toYAML(r)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(w, "---\n%s", b)
			return err
		case "table":
			_, err := fmt.Fprintln(w, strings.Join(activityRow(r), "  "))
			return err
		}
		httpStatus := "" // none recorded: empty, as JSON leaves it out
		if r.UpstreamHTTPStatus != 0 {
			httpStatus = strconv.Itoa(r.UpstreamHTTPStatus)
		}
		fields := []string{strconv.FormatInt(r.ID, 10), r.Time.UTC().Format(time.RFC3339Nano), r.Server, r.Tool, r.Status,
			strconv.FormatFloat(r.DurationMS, 'f', 3, 64), r.ErrorClass, r.FaultDomain, httpStatus,
			r.RequestID, r.Client, r.ProtocolEra, strconv.FormatBool(r.Reinit), strconv.FormatBool(r.Retried),
			strconv.FormatBool(r.TokenRefresh), r.Reason, r.Error, r.Replica, r.Method}
		for i := range fields {
			fields[i] = shown(fields[i]) // CSV ends up in terminals and spreadsheets, which act on escapes
		}
		return cw.Write(fields)
	}
	st, err := newClient(c).ExportActivity(c.Context, q)
	if err != nil {
		return fromRecord(c, err, func(rec *proxyd.Record) error {
			if err := rec.ExportActivity(c.Context, q, write); err != nil {
				return err
			}
			if cw != nil {
				cw.Flush()
				return cw.Error()
			}
			return nil
		})
	}
	defer st.Close()
	for {
		r, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return daemonErr(err)
		}
		if err := write(r); err != nil {
			return err
		}
	}
	if cw != nil {
		cw.Flush()
		return cw.Error()
	}
	return nil
}

func runActivitySummary(c *cli.Context) error {
	by, ok := summaryBy[c.String("by")]
	if !ok {
		return usageErr("--by %q: use server, tool, class, domain or replica (or %s)", c.String("by"), strings.Join(api.SummaryGroups, ", "))
	}
	f, err := format(c)
	if err != nil {
		return err
	}
	now := time.Now()
	q, err := activityQuery(c, now)
	if err != nil {
		return err
	}
	// The summary and its charts read the same window.
	if q.Until.IsZero() {
		q.Until = now
	}
	charts := c.Bool("charts")
	if !c.IsSet("charts") {
		charts = f == "table"
	}
	client := newClient(c)
	rows, err := client.ActivitySummary(c.Context, q, by)
	if err == nil {
		return printSummary(c, q, by, rows, charts, func(fn func(api.ActivityRecord) error) error {
			return daemonErr(streamEach(client.ExportActivity(c.Context, q))(fn))
		})
	}
	// Without the daemon, the summary and its charts both come from its record.
	return fromRecord(c, err, func(r *proxyd.Record) error {
		rows, err := r.ActivitySummary(c.Context, q, by)
		if err != nil {
			return err
		}
		return printSummary(c, q, by, rows, charts, func(fn func(api.ActivityRecord) error) error {
			return r.ExportActivity(c.Context, q, fn)
		})
	})
}

// printSummary renders the summary's rows, with their charts (read from
// export) when charts is set.
func printSummary(c *cli.Context, q api.ActivityQuery, by string, rows []api.ActivitySummaryRow, charts bool, export func(func(api.ActivityRecord) error) error) error {
	var withCharts []*summaryRow
	if charts && len(rows) > 0 {
		var err error
		if withCharts, err = summaryCharts(export, by, rows, q.Since, q.Until); err != nil {
			return err
		}
	}
	var v any = rows
	if withCharts != nil {
		v = withCharts
	}
	return render(c, v, func(w io.Writer) error {
		if len(rows) == 0 {
			emptyNote(w, "No calls match these filters.")
			return nil
		}
		t := newTable(w, strings.ToUpper(by), "CALLS", "FAILED", "FAILURE RATE")
		for _, r := range rows {
			_ = t.Append([]string{dash(r.Key), strconv.Itoa(r.Calls), strconv.Itoa(r.Failed), fmt.Sprintf("%.1f%%", r.FailureRate*100)})
		}
		if err := t.Render(); err != nil {
			return err
		}
		printSummaryCharts(w, withCharts)
		return nil
	})
}

// parseWhen reads a --since/--until value: a duration before now ("90s",
// "1h", "2d" for days) or an RFC 3339 time (with or without fractional
// seconds, or a bare date).
func parseWhen(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(d); err == nil && n >= 0 && strconv.Itoa(n) == d {
			const maxDays = int(math.MaxInt64 / int64(24*time.Hour)) // ~292 years: more overflows
			if n > maxDays {
				return time.Time{}, fmt.Errorf("time %q: at most %dd back", s, maxDays)
			}
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if ahead, ok := strings.CutPrefix(s, "+"); ok {
		if d, err := time.ParseDuration(ahead); err == nil && d >= 0 {
			return now.Add(d), nil
		}
		return time.Time{}, fmt.Errorf("time %q: +DURATION counts forward from now, e.g. +10m", s)
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("time %q: durations count back from now and must not be negative", s)
		}
		return now.Add(-d), nil
	}
	// RFC 3339 with or without the offset (then local time), and the form
	// the tables print ("2026-01-02 15:04:05 +01:00").
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05Z07:00", "2006-01-02 15:04:05 Z07:00",
		"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q: want a duration such as 30m, 1h or 7d, or a time such as 2026-01-02T15:04:05Z, 2026-01-02T15:04:05 (local) or 2026-01-02 15:04:05 +01:00 (as tables print it)", s)
}
