package commands

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/chart"
	"github.com/mcpx-dev/mcpx/proxyd/activity"
)

// summaryBy maps --by's short names to the summary's groupings.
var summaryBy = map[string]string{
	"server": "server", "tool": "tool",
	"class": "error_class", "error_class": "error_class",
	"domain": "fault_domain", "fault_domain": "fault_domain",
	"replica": "replica",
}

// chartBuckets is the number of time buckets of the summary's sparklines.
const chartBuckets = 30

// summaryRow is a summary group with its charts' data (additive to
// activity.SummaryRow: the same fields first).
type summaryRow struct {
	activity.SummaryRow
	P50MS   float64        `json:"p50_ms"`
	P90MS   float64        `json:"p90_ms"`
	P99MS   float64        `json:"p99_ms"`
	Latency []chart.Bucket `json:"latency_histogram"`
	Series  *timeSeries    `json:"time_buckets"`

	hist chart.Histogram
}

// timeSeries counts calls and failures per time bucket.
type timeSeries struct {
	Start        time.Time `json:"start"`
	WidthSeconds float64   `json:"width_seconds"`
	Calls        []int     `json:"calls"`
	Errors       []int     `json:"errors"`
}

// summaryCharts reads every record the summary counted (the same filter,
// pinned to the same window) and adds each group's latency histogram and
// calls and failures per time bucket.
func summaryCharts(c *cli.Context, q url.Values, by string, rows []activity.SummaryRow, since, until time.Time) ([]*summaryRow, error) {
	out := make([]*summaryRow, len(rows))
	byKey := map[string]*summaryRow{}
	for i, r := range rows {
		out[i] = &summaryRow{SummaryRow: r}
		byKey[r.Key] = out[i]
	}
	type point struct {
		at     time.Time
		key    string
		failed bool
	}
	var points []point
	err := newClient(c).Stream(c.Context, http.MethodGet, "/v1/activity/export?"+q.Encode(), nil, func(line []byte) error {
		var r activity.Record
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("decoding an activity record: %w", err)
		}
		if since.IsZero() && len(points) == 0 {
			since = r.Time
		}
		g := byKey[groupKey(r, by)]
		if g == nil {
			return nil // a record newer than the summary
		}
		g.hist.Add(r.DurationMS)
		points = append(points, point{r.Time, groupKey(r, by), r.Status == activity.StatusError})
		return nil
	})
	if err != nil {
		return nil, daemonErr(err)
	}
	if since.IsZero() || !until.After(since) {
		since = until.Add(-time.Minute)
	}
	width := until.Sub(since) / chartBuckets
	for _, g := range out {
		g.Series = &timeSeries{Start: since, WidthSeconds: width.Seconds(), Calls: make([]int, chartBuckets), Errors: make([]int, chartBuckets)}
		g.P50MS, g.P90MS, g.P99MS = g.hist.Percentile(0.5), g.hist.Percentile(0.9), g.hist.Percentile(0.99)
		g.Latency = g.hist.Buckets()
	}
	for _, p := range points {
		g := byKey[p.key]
		i := min(max(int(p.at.Sub(since)/width), 0), chartBuckets-1)
		g.Series.Calls[i]++
		if p.failed {
			g.Series.Errors[i]++
		}
	}
	return out, nil
}

// groupKey is the record's value of the summary's grouping.
func groupKey(r activity.Record, by string) string {
	switch by {
	case "tool":
		return r.Tool
	case "error_class":
		return r.ErrorClass
	case "fault_domain":
		return r.FaultDomain
	case "replica":
		return r.Replica
	}
	return r.Server
}

// printSummaryCharts draws each group's charts under the summary table.
func printSummaryCharts(w io.Writer, rows []*summaryRow) {
	for _, g := range rows {
		s := g.Series
		width := time.Duration(s.WidthSeconds * float64(time.Second)).Round(time.Second)
		fmt.Fprintf(w, "\n%s: %d calls, %d failed (%s to %s, one column = %s)\n", sanitize(dash(g.Key)), g.Calls, g.Failed,
			s.Start.Local().Format("2006-01-02 15:04"), s.Start.Add(time.Duration(len(s.Calls))*width).Local().Format("15:04"), width)
		fmt.Fprintf(w, "  calls    %s  max %d\n", chart.Sparkline(floats(s.Calls)), maxInt(s.Calls))
		fmt.Fprintf(w, "  failed   %s  max %d\n", chart.Sparkline(floats(s.Errors)), maxInt(s.Errors))
		for _, line := range g.hist.Lines("  ", 24) {
			fmt.Fprintln(w, line)
		}
	}
}

func floats(v []int) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func maxInt(v []int) int {
	m := 0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
