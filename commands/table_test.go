package commands

import (
	"bytes"
	"strings"
	"testing"
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
