package chart

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Span is one bar of a waterfall: something that started StartMS after
// the origin and took DurationMS.
type Span struct {
	Label      string
	StartMS    float64
	DurationMS float64
	// Timed is false for spans without a place on the axis (skipped
	// steps, cached fetches); they get a row with Note and no bar.
	Timed bool
	// Status is printed after the duration when it is not "ok" (a word,
	// so the meaning never rests on colour).
	Status string
	// Note follows everything else on the row (a URL, an HTTP status).
	Note string
	// Color is an ANSI colour for the bar ("" for none).
	Color string
}

// Waterfall draws spans on one time axis, like a browser's network panel:
// a scale line, then one row per span with its bar placed at its start.
// width is the number of columns of the bar area.
func Waterfall(w io.Writer, spans []Span, width int, colour bool) error {
	if width < 10 {
		width = 10
	}
	total := 0.0
	labelW := 0
	for _, s := range spans {
		labelW = max(labelW, len([]rune(s.Label)))
		if s.Timed {
			total = max(total, s.StartMS+s.DurationMS)
		}
	}
	if total <= 0 {
		total = 1
	}
	per := total / float64(width)
	pad := strings.Repeat(" ", labelW+2)
	mid := FormatMS(total / 2)
	end := FormatMS(total)
	// Scale: 0 at the left edge, the middle and the end of the axis.
	scale := []rune(strings.Repeat(" ", width+len(end)))
	put := func(at int, s string) {
		for i, r := range []rune(s) {
			if at+i >= 0 && at+i < len(scale) {
				scale[at+i] = r
			}
		}
	}
	put(0, "0")
	put(width/2-len(mid)/2, mid)
	put(width-len(end)+1, end)
	axis := "├" + strings.Repeat("─", width/2-1) + "┼" + strings.Repeat("─", width-width/2-1) + "┤"
	if _, err := fmt.Fprintf(w, "%s%s\n%s%s\n", pad, strings.TrimRight(string(scale), " "), pad, axis); err != nil {
		return err
	}
	for _, s := range spans {
		label := s.Label + strings.Repeat(" ", labelW-len([]rune(s.Label)))
		var bar, dur string
		if s.Timed {
			from := int(math.Floor(s.StartMS / per))
			to := int(math.Ceil((s.StartMS + s.DurationMS) / per))
			from = min(max(from, 0), width-1)
			to = min(max(to, from+1), width)
			bar = strings.Repeat(" ", from) + colourise(colour, s.Color, strings.Repeat("█", to-from)) + strings.Repeat(" ", width-to)
			dur = FormatMS(s.DurationMS)
		} else {
			bar = strings.Repeat(" ", width)
			dur = "-"
		}
		line := fmt.Sprintf("%s  %s %9s", label, bar, dur)
		if s.Status != "" && s.Status != "ok" {
			line += " " + strings.ToUpper(s.Status)
		}
		if s.Note != "" {
			line += "  " + s.Note
		}
		if _, err := fmt.Fprintln(w, strings.TrimRight(line, " ")); err != nil {
			return err
		}
	}
	return nil
}

func colourise(on bool, code, s string) string {
	if !on || code == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}
