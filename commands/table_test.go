package commands

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTableTrimsAndColoursWholeRows(t *testing.T) {
	var b bytes.Buffer
	tb := newTable(&b, "ID", "DOMAIN")
	_ = tb.Append([]string{"1", "upstream"})
	_ = tb.Append([]string{"2", "-"})
	tb.ColorRows([]string{red, ""})
	if err := tb.Render(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("lines %q", lines)
	}
	for _, l := range lines {
		if strings.HasSuffix(l, " ") {
			t.Errorf("trailing blanks in %q", l)
		}
	}
	if strings.Contains(lines[0], "\x1b[") || strings.Contains(lines[2], "\x1b[") {
		t.Errorf("colour outside the coloured row: %q", lines)
	}
	if !strings.HasPrefix(lines[1], "\x1b[31m") || !strings.HasSuffix(lines[1], "\x1b[0m") {
		t.Errorf("row 1 not coloured as a whole: %q", lines[1])
	}
}

func TestTableAsTSV(t *testing.T) {
	long := "connect: dial tcp 127.0.0.1:9: connection refused by the peer after a long wait"
	tests := []struct {
		name string
		w    func(*bytes.Buffer) io.Writer
		want []string
	}{
		{"tsv", func(b *bytes.Buffer) io.Writer { return tsvWriter{b, io.Discard} }, []string{
			"SERVER\tDETAIL",
			"docs\ta b c",  // a tab and line breaks inside a cell become spaces
			"api\t" + long, // never cut
		}},
		{"aligned", func(b *bytes.Buffer) io.Writer { return b }, []string{
			"SERVER   DETAIL",
			"docs     a b c",
			"api      …connection refused by the peer after a long wait",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			tb := newTable(tt.w(&b), "SERVER", "DETAIL")
			_ = tb.Append([]string{"docs", tb.Fit("a\tb\nc", 60, oneLine)})
			_ = tb.Append([]string{"api", tb.Fit(long, 60, fitCause)})
			tb.ColorRows([]string{red, red}) // never in TSV
			if err := tb.Render(); err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
			for i := range got {
				got[i] = strings.TrimSuffix(strings.TrimPrefix(got[i], "\x1b[31m"), "\x1b[0m")
			}
			if tt.name == "tsv" && strings.Contains(b.String(), "\x1b[") {
				t.Errorf("colour in TSV: %q", b.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestOneLineCutsWholeCharacters(t *testing.T) {
	for _, max := range []int{2, 3, 4, 5, 6, 7} {
		got := oneLine("ééééé", max) // two bytes each
		if !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
			t.Errorf("oneLine(ééééé, %d) = %q", max, got)
		}
	}
	if got := fitCause("Ω"+strings.Repeat("Ω", 40), 20); !utf8.ValidString(got) {
		t.Errorf("fitCause cut a character: %q", got)
	}
}

// A long cell is cut at a word, unless the word would take more than half
// of it.
func TestOneLineCutsAtAWord(t *testing.T) {
	for _, tt := range []struct {
		in   string
		max  int
		want string
	}{
		{"tells you about connections and calls", 20, "tells you about…"},
		{"about connections", 16, "about connectio…"},
		{"a supercalifragilistic word", 12, "a supercali…"},
		{"short enough", 20, "short enough"},
		{"ends right at a word here", 15, "ends right at…"},
	} {
		if got := oneLine(tt.in, tt.max); got != tt.want {
			t.Errorf("oneLine(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}
