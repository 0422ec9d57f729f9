package commands

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/proxyd/activity"
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
   mcpx activity summary --since 24h --by class
   mcpx activity --replica proxyd-0 --status error   # one replica of several`,
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
			Description: `Counts calls and failures per group; in the table each group also gets
calls and failures per time bucket over the window as sparklines and a
latency histogram with p50, p90 and p99 marked (--charts=false: the table
alone; with -o json or yaml, --charts adds the charts' data to each row).

Examples:
   mcpx activity summary --since 24h
   mcpx activity summary --since 1h --by class
   mcpx activity summary --by domain --server docs -o json --charts`,
			Flags: append(filterFlags(), outputFlag,
				&cli.StringFlag{Name: "by", Value: "server", Usage: "group by server, tool, class (error class), domain (fault domain) or replica"},
				&cli.BoolFlag{Name: "charts", Value: true, Usage: "draw sparklines and latency histograms (table); add their data (json, yaml)"}),
			Action: runActivitySummary,
		},
	},
}

// activityQuery validates the filter flags and turns them into the
// daemon's query parameters.
func activityQuery(c *cli.Context, now time.Time) (url.Values, error) {
	q := url.Values{}
	lists := []struct {
		flag, param string
		vocab       []string
	}{
		{"server", "server", nil},
		{"tool", "tool", nil},
		{"status", "status", activity.Statuses},
		{"error-class", "error_class", callerr.Classes},
		{"fault-domain", "fault_domain", callerr.Domains},
		{"replica", "replica", nil},
	}
	for _, l := range lists {
		if !c.IsSet(l.flag) {
			continue
		}
		for _, v := range api.SplitList(c.StringSlice(l.flag)) {
			if l.vocab != nil && !slices.Contains(l.vocab, v) {
				return nil, usageErr("--%s %q is not one of: %s", l.flag, v, strings.Join(l.vocab, ", "))
			}
			q.Add(l.param, v)
		}
	}
	for _, name := range []string{"since", "until"} {
		if v := c.String(name); v != "" {
			t, err := parseWhen(v, now)
			if err != nil {
				return nil, usageErr("--%s: %v", name, err)
			}
			q.Set(name, t.UTC().Format(time.RFC3339Nano))
		}
	}
	return q, nil
}

// parseWhen reads "1h", "30m", "7d" (ago) or an RFC 3339 time.
func parseWhen(v string, now time.Time) (time.Time, error) {
	if strings.HasSuffix(v, "d") {
		if n, err := strconv.Atoi(strings.TrimSuffix(v, "d")); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			d = -d
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is neither a duration (1h, 30m, 7d) nor an RFC 3339 time", v)
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
	q.Set("limit", strconv.Itoa(c.Int("limit")))
	var recs []activity.Record
	if err := newClient(c).Do(c.Context, http.MethodGet, "/v1/activity?"+q.Encode(), nil, &recs); err != nil {
		return daemonErr(err)
	}
	on := colorEnabled(c)
	return render(c, recs, func(w io.Writer) error {
		if len(recs) == 0 {
			if len(q) > 1 {
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

func activityRow(r activity.Record) []string {
	httpStatus := "-"
	if r.UpstreamHTTPStatus != 0 {
		httpStatus = strconv.Itoa(r.UpstreamHTTPStatus)
	}
	return []string{
		strconv.FormatInt(r.ID, 10),
		r.Time.Local().Format("2006-01-02 15:04:05"),
		r.Server, r.Tool, r.Status,
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
	var r activity.Record
	if err := newClient(c).Do(c.Context, http.MethodGet, fmt.Sprintf("/v1/activity/%d", id), nil, &r); err != nil {
		return daemonErr(err)
	}
	return render(c, r, func(w io.Writer) error {
		row := func(k, v string) {
			if v != "" {
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
		if e := strings.TrimSpace(sanitize(r.Error)); e != "" {
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
	err = newClient(c).Stream(ctx, http.MethodGet, "/v1/activity/follow?"+q.Encode(), nil, func(line []byte) error {
		switch f {
		case "json":
			_, err := fmt.Fprintf(w, "%s\n", line)
			return err
		case "yaml":
			b, err := toYAML(json.RawMessage(line))
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(w, "---\n%s", b)
			return err
		}
		var r activity.Record
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		_, err := fmt.Fprintln(w, color(on && domainColor(r.FaultDomain) != "", domainColor(r.FaultDomain), strings.Join(activityRow(r), "  ")))
		return err
	})
	if ctx.Err() != nil {
		return nil
	}
	return daemonErr(err)
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
		_ = cw.Write([]string{"id", "time", "server", "tool", "status", "duration_ms", "error_class", "fault_domain", "upstream_http_status", "request_id", "client", "protocol_era", "reinit", "retried", "token_refresh", "reason", "error", "replica"})
	}
	cl := newClient(c)
	err = cl.Stream(c.Context, http.MethodGet, "/v1/activity/export?"+q.Encode(), nil, func(line []byte) error {
		if cw == nil {
			_, err := fmt.Fprintf(w, "%s\n", line)
			return err
		}
		var r activity.Record
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		return cw.Write([]string{strconv.FormatInt(r.ID, 10), r.Time.UTC().Format(time.RFC3339Nano), r.Server, r.Tool, r.Status,
			strconv.FormatFloat(r.DurationMS, 'f', 3, 64), r.ErrorClass, r.FaultDomain, strconv.Itoa(r.UpstreamHTTPStatus),
			r.RequestID, r.Client, r.ProtocolEra, strconv.FormatBool(r.Reinit), strconv.FormatBool(r.Retried),
			strconv.FormatBool(r.TokenRefresh), r.Reason, r.Error, r.Replica})
	})
	if cw != nil {
		cw.Flush()
	}
	return daemonErr(err)
}

func runActivitySummary(c *cli.Context) error {
	by, ok := summaryBy[c.String("by")]
	if !ok {
		return usageErr("--by %q: use server, tool, class, domain or replica", c.String("by"))
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
	if q.Get("until") == "" {
		q.Set("until", now.UTC().Format(time.RFC3339Nano))
	}
	charts := c.Bool("charts")
	if !c.IsSet("charts") {
		charts = f == "table"
	}
	q.Set("by", by)
	var rows []activity.SummaryRow
	if err := newClient(c).Do(c.Context, http.MethodGet, "/v1/activity/summary?"+q.Encode(), nil, &rows); err != nil {
		return daemonErr(err)
	}
	var withCharts []*summaryRow
	if charts && len(rows) > 0 {
		since, _ := time.Parse(time.RFC3339Nano, q.Get("since"))
		until, _ := time.Parse(time.RFC3339Nano, q.Get("until"))
		eq := url.Values{}
		for k, v := range q {
			if k != "by" {
				eq[k] = v
			}
		}
		if withCharts, err = summaryCharts(c, eq, by, rows, since, until); err != nil {
			return err
		}
	}
	var v any = rows
	if withCharts != nil {
		v = withCharts
	}
	return render(c, v, func(w io.Writer) error {
		if len(rows) == 0 {
			fmt.Fprintln(w, "No calls match these filters.")
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
