package probe_test

import (
	"encoding/json"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/tlsfixtures"
	"github.com/mcpx-dev/mcpx/probe"
)

// The steps and the discovery fetches sit on one time axis: each starts
// where the one before it ended or later, and the fetches lie inside the
// auth step.
func TestTimelineIsOrdered(t *testing.T) {
	rep := probeFixture(t, tlsfixtures.KindAuthOK, nil)
	end := 0.0
	var auth probe.Step
	for _, s := range rep.Steps {
		if s.Status == probe.StatusSkip {
			if s.StartMS != 0 {
				t.Errorf("skipped step %s has a start %v", s.ID, s.StartMS)
			}
			continue
		}
		if s.StartMS+0.05 < end { // rounding to microseconds
			t.Errorf("step %s starts at %.3f ms, before the step before ended (%.3f ms)", s.ID, s.StartMS, end)
		}
		end = s.StartMS + s.DurationMS
		if s.ID == probe.StepAuth {
			auth = s
		}
	}
	raw, _ := json.Marshal(auth.Data)
	var facts struct {
		Attempts []struct {
			URL        string  `json:"url"`
			StartMS    float64 `json:"start_ms"`
			DurationMS float64 `json:"duration_ms"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal(raw, &facts); err != nil || len(facts.Attempts) < 2 {
		t.Fatalf("auth step data without attempts: %v %s", err, raw)
	}
	for _, a := range facts.Attempts {
		if a.DurationMS <= 0 || a.StartMS < auth.StartMS-0.05 || a.StartMS+a.DurationMS > auth.StartMS+auth.DurationMS+0.05 {
			t.Errorf("fetch %s at %.3f+%.3f ms lies outside the auth step %.3f+%.3f ms", a.URL, a.StartMS, a.DurationMS, auth.StartMS, auth.DurationMS)
		}
	}
}
