package commands

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/mcpx-dev/mcpx/internal/chart"
	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/probe"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// waterfallWidth is the bar area of the probe's timeline: with the labels
// and durations the chart fits 80 columns.
const waterfallWidth = 44

// probeWaterfall draws the probe's steps, and the discovery fetches inside
// the auth step, on one time axis, so the slow step shows at a glance.
func probeWaterfall(w io.Writer, rep *probe.Report, colour bool) error {
	var spans []chart.Span
	timed := false
	for _, s := range rep.Steps {
		sp := chart.Span{Label: s.ID, StartMS: s.StartMS, DurationMS: s.DurationMS, Status: string(s.Status),
			Timed: s.Status != probe.StatusSkip, Color: statusColor(s.Status)}
		timed = timed || sp.Timed
		spans = append(spans, sp)
		if s.ID == probe.StepAuth {
			spans = append(spans, fetchSpans(s.Data)...)
		}
	}
	if !timed {
		return nil
	}
	fmt.Fprintln(w, "\ntimeline")
	return chart.Waterfall(w, spans, waterfallWidth, colour)
}

func statusColor(status api.StepStatus) string {
	switch status {
	case probe.StatusOK:
		return green
	case probe.StatusWarn:
		return yellow
	case probe.StatusFail:
		return red
	}
	return ""
}

// fetchSpans are the discovery fetches recorded in the auth step's data.
// The data arrives as the probe's own struct in-process and as a decoded
// JSON object from proxyd: going through JSON reads both alike.
func fetchSpans(data any) []chart.Span {
	if data == nil {
		return nil
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil
	}
	var facts struct {
		Attempts []struct {
			URL        string  `json:"url"`
			Status     int     `json:"status"`
			Error      string  `json:"error"`
			Used       bool    `json:"used"`
			StartMS    float64 `json:"start_ms"`
			DurationMS float64 `json:"duration_ms"`
		} `json:"attempts"`
		Cached bool `json:"cached"`
	}
	if json.Unmarshal(raw, &facts) != nil {
		return nil
	}
	out := make([]chart.Span, 0, len(facts.Attempts))
	for i, a := range facts.Attempts {
		tree := "├ "
		if i == len(facts.Attempts)-1 {
			tree = "└ "
		}
		note := redact.Control(a.URL)
		switch {
		case a.Status != 0:
			note = fmt.Sprintf("%d %s", a.Status, note)
		case a.Error != "":
			note = "error " + note
		}
		sp := chart.Span{Label: " " + tree + fetchKind(a.URL), StartMS: a.StartMS, DurationMS: a.DurationMS,
			Timed: a.DurationMS > 0 || a.StartMS > 0, Note: note}
		if !sp.Timed && facts.Cached {
			sp.Note = "cached " + sp.Note
		}
		out = append(out, sp)
	}
	return out
}

// fetchKind names a discovery document by its well-known path.
func fetchKind(raw string) string {
	p := raw
	if u, err := url.Parse(raw); err == nil {
		p = u.Path
	}
	switch {
	case strings.Contains(p, "oauth-protected-resource"):
		return "resource md"
	case strings.Contains(p, "oauth-authorization-server"):
		return "as metadata"
	case strings.Contains(p, "openid-configuration"):
		return "oidc config"
	}
	return "fetch"
}
