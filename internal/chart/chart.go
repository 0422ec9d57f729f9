// Package chart draws small charts for the terminal: sparklines, bars,
// latency histograms with percentiles marked, and timing waterfalls. It
// only lays out text; callers decide about colour, and words, never colour
// alone, carry the meaning.
package chart

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// levels are the block characters of a sparkline, lowest first.
var levels = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws one character per value, scaled to the largest value:
// zero is the lowest block, any other value at least the second lowest,
// so "nothing" and "a little" differ.
func Sparkline(values []float64) string {
	peak := 0.0
	for _, v := range values {
		peak = max(peak, v)
	}
	var b strings.Builder
	for _, v := range values {
		b.WriteRune(levels[level(v, peak)])
	}
	return b.String()
}

func level(v, peak float64) int {
	if v <= 0 || peak <= 0 || math.IsNaN(v) {
		return 0
	}
	l := int(math.Ceil(v / peak * float64(len(levels)-1)))
	return min(max(l, 1), len(levels)-1)
}

// eighths are left-aligned partial blocks, one eighth to seven eighths.
var eighths = []rune("▏▎▍▌▋▊▉")

// Bar draws v out of peak in width cells with eighth-cell precision; any
// value above zero shows at least a sliver.
func Bar(v, peak float64, width int) string {
	if width <= 0 || v <= 0 || peak <= 0 {
		return ""
	}
	n := int(math.Round(min(v/peak, 1) * float64(width*8)))
	n = max(n, 1)
	s := strings.Repeat("█", n/8)
	if r := n % 8; r > 0 {
		s += string(eighths[r-1])
	}
	return s
}

// Percentile is the q-quantile (0..1) of sorted values, nearest rank.
func Percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// FormatMS prints a duration in milliseconds with a unit that keeps it
// short: 0.42ms, 12.3ms, 1.25s, 2m05s.
func FormatMS(ms float64) string {
	switch {
	case ms < 10:
		return fmt.Sprintf("%.2fms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.1fms", ms)
	case ms < 60_000:
		return fmt.Sprintf("%.2fs", ms/1000)
	}
	s := int(math.Round(ms / 1000))
	return fmt.Sprintf("%dm%02ds", s/60, s%60)
}

// bucketBounds are the upper bounds (ms) of the latency histogram: a
// 1-2-5 series from 0.1 ms to 60 s, and everything above.
var bucketBounds = func() []float64 {
	var out []float64
	for _, decade := range []float64{0.1, 1, 10, 100, 1000, 10000} {
		for _, m := range []float64{1, 2, 5} {
			out = append(out, decade*m)
		}
	}
	return append(out, 60000, math.Inf(1))
}()

// Histogram is a latency distribution drawn as one bar per bucket.
type Histogram struct {
	values []float64
	sorted bool
}

// Add records one latency in milliseconds.
func (h *Histogram) Add(ms float64) {
	h.values = append(h.values, ms)
	h.sorted = false
}

// Count is the number of values.
func (h *Histogram) Count() int { return len(h.values) }

// Percentile is the q-quantile of the values.
func (h *Histogram) Percentile(q float64) float64 {
	if !h.sorted {
		slices.Sort(h.values)
		h.sorted = true
	}
	return Percentile(h.values, q)
}

// Bucket is one bar of a histogram: values ≤ LE (and above the bucket
// before it).
type Bucket struct {
	LE    float64 `json:"le_ms"`
	Count int     `json:"count"`
	// Overflow marks the last bucket: values above LE (JSON has no +Inf).
	Overflow bool `json:"overflow,omitempty"`
}

// Buckets are the non-empty range of the 1-2-5 buckets: from the first
// bucket holding a value to the last, empty ones between kept.
func (h *Histogram) Buckets() []Bucket {
	counts := make([]int, len(bucketBounds))
	for _, v := range h.values {
		i, _ := slices.BinarySearch(bucketBounds, v)
		counts[min(i, len(counts)-1)]++
	}
	first, last := -1, -1
	for i, c := range counts {
		if c > 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return nil
	}
	out := make([]Bucket, 0, last-first+1)
	for i := first; i <= last; i++ {
		b := Bucket{LE: bucketBounds[i], Count: counts[i]}
		if math.IsInf(b.LE, 1) {
			b.LE, b.Overflow = bucketBounds[i-1], true
		}
		out = append(out, b)
	}
	return out
}

// Marks are the percentiles drawn on a histogram.
var Marks = []struct {
	Name string
	Q    float64
}{{"p50", 0.50}, {"p90", 0.90}, {"p99", 0.99}}

// Lines draws the histogram: a header with the marked percentiles, then
// one line per bucket with its bar, its count and the percentiles that
// fall into it. indent starts every line.
func (h *Histogram) Lines(indent string, width int) []string {
	if h.Count() == 0 {
		return nil
	}
	var head []string
	at := map[int][]string{}
	buckets := h.Buckets()
	for _, m := range Marks {
		p := h.Percentile(m.Q)
		head = append(head, m.Name+" "+FormatMS(p))
		for i, b := range buckets {
			if p <= b.LE || b.Overflow {
				at[i] = append(at[i], m.Name)
				break
			}
		}
	}
	peak := 0
	for _, b := range buckets {
		peak = max(peak, b.Count)
	}
	out := []string{indent + "latency  " + strings.Join(head, "  ")}
	for i, b := range buckets {
		label := "≤" + boundLabel(b.LE)
		if b.Overflow {
			label = ">" + boundLabel(b.LE)
		}
		line := fmt.Sprintf("%s  %-7s %-*s %6d", indent, label, width, Bar(float64(b.Count), float64(peak), width), b.Count)
		if ms := at[i]; len(ms) > 0 {
			line += "  ← " + strings.Join(ms, " ")
		}
		out = append(out, strings.TrimRight(line, " "))
	}
	return out
}

func boundLabel(ms float64) string {
	switch {
	case ms < 1:
		return fmt.Sprintf("%gms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.0fms", ms)
	}
	return fmt.Sprintf("%gs", ms/1000)
}
