package commands

import (
	"encoding/csv"
	"encoding/json"
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

	"github.com/mcpx-dev/mcpx/internal/redact"
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
		&cli.StringFlag{Name: "since", Usage: "from `WHEN`: a duration ago (1h, 30m, 7d) or RFC 3339"},
		&cli.StringFlag{Name: "until", Usage: "up to `WHEN`: a duration ago or RFC 3339"},
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
   mcpx activity show 42
   mcpx activity follow --status error
   mcpx activity export --format csv --since 24h > calls.csv
   mcpx activity summary --since 24h --by error_class`,
	Flags:  append(filterFlags(), outputFlag, &cli.IntFlag{Name: "limit", Value: 50, Usage: "at most `N` records"}),
	Action: runActivityList,
	Subcommands: []*cli.Command{
		{
			Name:   "list",
			Usage:  "list records, newest first",
			Flags:  append(filterFlags(), outputFlag, &cli.IntFlag{Name: "limit", Value: 50, Usage: "at most `N` records"}),
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
			Name:   "follow",
			Usage:  "print records live as calls complete (Ctrl-C to stop)",
			Flags:  append(filterFlags(), outputFlag),
			Action: runActivityFollow,
		},
		{
			Name:   "export",
			Usage:  "stream every matching record as JSON lines or CSV",
			Flags:  append(filterFlags(), &cli.StringFlag{Name: "format", Value: "jsonl", Usage: "jsonl or csv"}),
			Action: runActivityExport,
		},
		{
			Name:  "summary",
			Usage: "counts and failure rates grouped by server, tool, error class or fault domain",
			Flags: append(filterFlags(), outputFlag,
				&cli.StringFlag{Name: "by", Value: "server", Usage: "server, tool, error_class or fault_domain"}),
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
	if c.NArg() > 0 {
		return usageErr("unknown activity subcommand %q (list, show, follow, export, summary)", c.Args().First())
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
		return daemonErr(err)
	}
	on := colorEnabled(c)
	return render(c, recs, func(w io.Writer) error {
		if len(recs) == 0 {
			if len(filtered) > 0 {
				fmt.Fprintln(w, "No calls match these filters.")
			} else {
				fmt.Fprintln(w, "No calls recorded yet.")
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
		r.Time.Local().Format("2006-01-02 15:04:05"),
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
		return daemonErr(err)
	}
	return render(c, r, func(w io.Writer) error {
		row := func(k, v string) {
			if v = shown(v); v != "" {
				fmt.Fprintf(w, "%-22s %s\n", k+":", v)
			}
		}
		row("id", strconv.FormatInt(r.ID, 10))
		row("time", r.Time.Format(time.RFC3339Nano))
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
	if f == "table" {
		errorf(c, "following activity (Ctrl-C to stop)\n")
	}
	on := colorEnabled(c)
	w := c.App.Writer
	st, err := newClient(c).FollowActivity(ctx, q)
	if err != nil {
		return daemonErr(err)
	}
	defer st.Close()
	for {
		r, err := st.Next()
		if errors.Is(err, io.EOF) || ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return daemonErr(err)
		}
		switch f {
		case "json":
			b, err := json.Marshal(r)
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
			fmt.Fprintln(w, color(on && domainColor(r.FaultDomain) != "", domainColor(r.FaultDomain), strings.Join(activityRow(r), "  ")))
		}
	}
}

func runActivityExport(c *cli.Context) error {
	fmtName := c.String("format")
	if fmtName != "jsonl" && fmtName != "csv" {
		return usageErr("--format %q: use jsonl or csv", fmtName)
	}
	q, err := activityQuery(c, time.Now())
	if err != nil {
		return err
	}
	w := c.App.Writer
	var cw *csv.Writer
	if fmtName == "csv" {
		cw = csv.NewWriter(w)
		_ = cw.Write([]string{"id", "time", "server", "tool", "status", "duration_ms", "error_class", "fault_domain", "upstream_http_status", "request_id", "client", "protocol_era", "reinit", "retried", "token_refresh", "reason", "error"})
	}
	st, err := newClient(c).ExportActivity(c.Context, q)
	if err != nil {
		return daemonErr(err)
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
		if cw == nil {
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%s\n", b)
			continue
		}
		fields := []string{strconv.FormatInt(r.ID, 10), r.Time.UTC().Format(time.RFC3339Nano), r.Server, r.Tool, r.Status,
			strconv.FormatFloat(r.DurationMS, 'f', 3, 64), r.ErrorClass, r.FaultDomain, strconv.Itoa(r.UpstreamHTTPStatus),
			r.RequestID, r.Client, r.ProtocolEra, strconv.FormatBool(r.Reinit), strconv.FormatBool(r.Retried),
			strconv.FormatBool(r.TokenRefresh), r.Reason, r.Error}
		for i := range fields {
			fields[i] = shown(fields[i]) // CSV ends up in terminals and spreadsheets, which act on escapes
		}
		_ = cw.Write(fields)
	}
	if cw != nil {
		cw.Flush()
		return cw.Error()
	}
	return nil
}

func runActivitySummary(c *cli.Context) error {
	by := c.String("by")
	if !slices.Contains([]string{"server", "tool", "error_class", "fault_domain"}, by) {
		return usageErr("--by %q: use server, tool, error_class or fault_domain", by)
	}
	if _, err := format(c); err != nil {
		return err
	}
	q, err := activityQuery(c, time.Now())
	if err != nil {
		return err
	}
	rows, err := newClient(c).ActivitySummary(c.Context, q, by)
	if err != nil {
		return daemonErr(err)
	}
	return render(c, rows, func(w io.Writer) error {
		if len(rows) == 0 {
			fmt.Fprintln(w, "No calls match these filters.")
			return nil
		}
		t := newTable(w, strings.ToUpper(by), "CALLS", "FAILED", "FAILURE RATE")
		for _, r := range rows {
			_ = t.Append([]string{dash(r.Key), strconv.Itoa(r.Calls), strconv.Itoa(r.Failed), fmt.Sprintf("%.1f%%", r.FailureRate*100)})
		}
		return t.Render()
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
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("time %q: durations count back from now and must not be negative", s)
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q: want a duration such as 30m, 1h or 7d, or an RFC 3339 time such as 2026-01-02T15:04:05Z", s)
}
