package chart

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if got != string(want) {
		t.Fatalf("differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestSparkline(t *testing.T) {
	tests := []struct {
		in   []float64
		want string
	}{
		{nil, ""},
		{[]float64{0, 0, 0}, "▁▁▁"},
		{[]float64{0, 1, 2, 3, 4, 5, 6}, "▁▃▄▅▆▇█"},
		{[]float64{0, 0.01, 100}, "▁▂█"}, // a little is not nothing
		{[]float64{5, 5}, "██"},
	}
	for _, tt := range tests {
		if got := Sparkline(tt.in); got != tt.want {
			t.Errorf("Sparkline(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestBar(t *testing.T) {
	tests := []struct {
		v, peak float64
		width   int
		want    string
	}{
		{0, 10, 4, ""},
		{10, 10, 4, "████"},
		{5, 10, 4, "██"},
		{1, 10, 4, "▍"},     // 3.2 eighths → 3
		{0.001, 10, 4, "▏"}, // a sliver, never nothing
		{20, 10, 4, "████"}, // capped at the width
		{1, 0, 4, ""},
	}
	for _, tt := range tests {
		if got := Bar(tt.v, tt.peak, tt.width); got != tt.want {
			t.Errorf("Bar(%v, %v, %d) = %q, want %q", tt.v, tt.peak, tt.width, got, tt.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for q, want := range map[float64]float64{0: 1, 0.5: 5, 0.9: 9, 0.99: 10, 1: 10} {
		if got := Percentile(s, q); got != want {
			t.Errorf("Percentile(%v) = %v, want %v", q, got, want)
		}
	}
	if Percentile(nil, 0.5) != 0 {
		t.Error("empty input")
	}
}

func TestFormatMS(t *testing.T) {
	for in, want := range map[float64]string{0.421: "0.42ms", 12.34: "12.3ms", 1250: "1.25s", 125000: "2m05s"} {
		if got := FormatMS(in); got != want {
			t.Errorf("FormatMS(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestHistogramGolden(t *testing.T) {
	var h Histogram
	for i := 0; i < 60; i++ {
		h.Add(3)
	}
	for i := 0; i < 30; i++ {
		h.Add(40)
	}
	for i := 0; i < 9; i++ {
		h.Add(180)
	}
	h.Add(2500)
	if p := h.Percentile(0.5); p != 3 {
		t.Fatalf("p50 %v", p)
	}
	golden(t, "histogram", strings.Join(h.Lines("  ", 20), "\n")+"\n")

	var empty Histogram
	if empty.Lines("", 10) != nil || empty.Buckets() != nil {
		t.Fatal("an empty histogram draws nothing")
	}
	var huge Histogram
	huge.Add(90_000)
	if b := huge.Buckets(); len(b) != 1 || b[0].Count != 1 || !b[0].Overflow || b[0].LE != 60000 {
		t.Fatalf("a value above every bound lands in the last bucket: %+v", b)
	}
	if _, err := json.Marshal(huge.Buckets()); err != nil {
		t.Fatalf("the overflow bucket must encode as JSON: %v", err)
	}
	if l := huge.Lines("", 5); !strings.Contains(l[1], ">60s") || !strings.Contains(l[1], "p50") {
		t.Fatalf("last bucket label: %q", l[1])
	}
}

func TestWaterfallGolden(t *testing.T) {
	spans := []Span{
		{Label: "dns", StartMS: 0, DurationMS: 0.3, Timed: true, Status: "ok"},
		{Label: "tcp", StartMS: 0.4, DurationMS: 1.1, Timed: true, Status: "ok"},
		{Label: "tls", StartMS: 1.6, DurationMS: 14.2, Timed: true, Status: "warn"},
		{Label: "http", StartMS: 16, DurationMS: 22, Timed: true, Status: "ok"},
		{Label: "mcp", Status: "skip", Note: "skipped"},
		{Label: "auth", StartMS: 40, DurationMS: 60, Timed: true, Status: "fail"},
		{Label: "  prm", StartMS: 41, DurationMS: 20, Timed: true, Note: "200 https://x.test/.well-known/oauth-protected-resource"},
		{Label: "  as", StartMS: 62, DurationMS: 37.5, Timed: true, Note: "404 https://as.test/.well-known/oauth-authorization-server"},
	}
	var b bytes.Buffer
	if err := Waterfall(&b, spans, 40, false); err != nil {
		t.Fatal(err)
	}
	golden(t, "waterfall", b.String())

	// Colour wraps only the bar.
	b.Reset()
	_ = Waterfall(&b, spans[:1], 10, true)
	if !strings.Contains(b.String(), "█") || strings.Contains(b.String(), "\x1b[") {
		t.Fatalf("no colour was asked for on the span: %q", b.String())
	}
	b.Reset()
	_ = Waterfall(&b, []Span{{Label: "x", DurationMS: 1, Timed: true, Color: "32"}}, 10, true)
	if !strings.Contains(b.String(), "\x1b[32m██████████\x1b[0m") {
		t.Fatalf("coloured bar: %q", b.String())
	}
	// Nothing timed: still a valid chart.
	b.Reset()
	if err := Waterfall(&b, []Span{{Label: "dns", Status: "skip"}}, 10, false); err != nil || !strings.Contains(b.String(), "dns") {
		t.Fatalf("untimed: %v %q", err, b.String())
	}
}
