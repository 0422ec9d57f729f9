package commands

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/mcpx-dev/mcpx/internal/chart"
	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// summaryBy maps --by's short names (and api.SummaryGroups themselves)
// to the summary's groupings.
var summaryBy = map[string]string{
	"server": "server", "tool": "tool",
	"class": "error_class", "error_class": "error_class",
	"domain": "fault_domain", "fault_domain": "fault_domain",
	"replica": "replica",
}

// chartBuckets is the number of time buckets of the summary's sparklines.
const chartBuckets = 30

// summaryRow is a summary group with its charts' data (additive to
// api.ActivitySummaryRow: the same fields first).
type summaryRow struct {
	api.ActivitySummaryRow
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

// summaryCharts reads every record the summary counted (export: the same
// filter, pinned to the same window) and adds each group's latency
// histogram and calls and failures per time bucket.
func summaryCharts(export func(func(api.ActivityRecord) error) error, by string, rows []api.ActivitySummaryRow, since, until time.Time) ([]*summaryRow, error) {
	out := make([]*summaryRow, len(rows))
	byKey := map[string]*summaryRow{}
	for i, r := range rows {
		out[i] = &summaryRow{ActivitySummaryRow: r}
		byKey[r.Key] = out[i]
	}
	type point struct {
		at     time.Time
		key    string
		failed bool
	}
	var points []point
	err := export(func(r api.ActivityRecord) error {
		if since.IsZero() && len(points) == 0 {
			since = r.Time
		}
		g := byKey[groupKey(r, by)]
		if g == nil {
			return nil // a record newer than the summary
		}
		g.hist.Add(r.DurationMS)
		points = append(points, point{r.Time, groupKey(r, by), r.Status == api.StatusError})
		return nil
	})
	if err != nil {
		return nil, err
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
func groupKey(r api.ActivityRecord, by string) string {
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
		fmt.Fprintf(w, "\n%s: %d calls, %d failed (%s to %s, one column = %s)\n", redact.Control(dash(g.Key)), g.Calls, g.Failed,
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

// streamEach passes every value of an opened stream to fn until the
// stream ends (nil), fn fails or the stream breaks; open is the result
// of an api.Client stream method.
func streamEach[T any](st *api.Stream[T], err error) func(fn func(T) error) error {
	return func(fn func(T) error) error {
		if err != nil {
			return err
		}
		defer st.Close()
		for {
			v, err := st.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := fn(v); err != nil {
				return err
			}
		}
	}
}
