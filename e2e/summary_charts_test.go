package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
)

// activity summary draws, per group, calls and failures over the window
// and a latency histogram with percentiles; JSON keeps its shape unless
// --charts asks for the charts' data.
func TestActivitySummaryCharts(t *testing.T) {
	e, _ := fixtureEnv(t, mcpserver.EraBoth, "auto")
	for range 6 {
		e.mustRun("call", "fixture", "echo", "text=chart")
	}
	for range 2 {
		e.run("call", "fixture", "fail")
	}

	r := e.mustRun("activity", "summary")
	for _, want := range []string{"SERVER", "fixture: 8 calls, 2 failed", "  calls    ", "  failed   ", "latency  p50 ", "← p50"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := e.mustRun("activity", "summary", "--charts=false"); strings.Contains(r.stdout, "latency") {
		t.Errorf("--charts=false draws charts:\n%s", r.stdout)
	}
	for _, by := range []string{"class", "error_class"} {
		r := e.mustRun("activity", "summary", "--by", by)
		if !strings.Contains(r.stdout, "ERROR_CLASS") || !strings.Contains(r.stdout, "tool_error: 2 calls, 2 failed") {
			t.Errorf("--by %s:\n%s", by, r.stdout)
		}
	}
	if r := e.mustRun("activity", "summary", "--by", "domain"); !strings.Contains(r.stdout, "upstream: 2 calls, 2 failed") {
		t.Errorf("--by domain:\n%s", r.stdout)
	}
	if r := e.run("activity", "summary", "--by", "weather"); r.code != 2 {
		t.Errorf("--by weather: want a usage error:\n%s", r)
	}

	var plain []map[string]any
	e.runJSON(0, &plain, "activity", "summary")
	if len(plain) != 1 || plain[0]["p50_ms"] != nil {
		t.Errorf("JSON without --charts keeps the summary's shape: %v", plain)
	}
	var rows []struct {
		Key     string  `json:"key"`
		Calls   int     `json:"calls"`
		Failed  int     `json:"failed"`
		P50MS   float64 `json:"p50_ms"`
		P99MS   float64 `json:"p99_ms"`
		Latency []struct {
			Count int `json:"count"`
		} `json:"latency_histogram"`
		Series struct {
			Calls  []int `json:"calls"`
			Errors []int `json:"errors"`
		} `json:"time_buckets"`
	}
	r = e.run("activity", "summary", "-o", "json", "--charts")
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("charts JSON: %v\n%s", err, r)
	}
	g := rows[0]
	sum := func(v []int) (n int) {
		for _, x := range v {
			n += x
		}
		return n
	}
	hist := 0
	for _, b := range g.Latency {
		hist += b.Count
	}
	if g.Calls != 8 || g.Failed != 2 || sum(g.Series.Calls) != 8 || sum(g.Series.Errors) != 2 || hist != 8 || g.P50MS <= 0 || g.P99MS < g.P50MS {
		t.Errorf("charts data disagrees with the counts: %+v", g)
	}
}
