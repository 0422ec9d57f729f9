package commands

import (
	"regexp"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/mcpx-dev/mcpx/internal/livestats"
)

func topSample() topFrame {
	return topFrame{At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local), Rows: []topRow{
		{Server: "alpha", State: "ready", Refreshes: -1, Stats: livestats.Stats{Calls: 10, Failed: 1, PerSecond: 2, P99MS: 50, FailedBy: map[string]int{"http": 1}}},
		{Server: "beta", State: "ready", Refreshes: 3, Stats: livestats.Stats{Calls: 4, Failed: 3, PerSecond: 0.5, P99MS: 900, FailedBy: map[string]int{"timeout": 2, "http": 1}}},
		{Server: "gamma", State: "error", Refreshes: -1},
	}}
}

func names(rows []topRow) string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Server)
	}
	return strings.Join(out, ",")
}

func TestTopViewSortAndFilter(t *testing.T) {
	f := topSample()
	tests := []struct {
		view topView
		want string
	}{
		{topView{sortBy: topSortServer}, "alpha,beta,gamma"},
		{topView{sortBy: topSortCalls}, "alpha,beta,gamma"},
		{topView{sortBy: topSortFailures}, "beta,alpha,gamma"},
		{topView{sortBy: topSortP99}, "beta,alpha,gamma"},
		{topView{sortBy: topSortP99, reverse: true}, "gamma,alpha,beta"},
		{topView{sortBy: topSortServer, domain: "upstream"}, "alpha,beta"}, // only servers with failures
	}
	for _, tt := range tests {
		if got := names(tt.view.rows(f)); got != tt.want {
			t.Errorf("%+v: %s, want %s", tt.view, got, tt.want)
		}
	}
	cells := topCells(f.Rows[1])
	if cells[4] != "timeout 2, http 1" || cells[3] != "75.0%" || cells[9] != "3" {
		t.Fatalf("cells %q", cells)
	}
	if c := topCells(f.Rows[2]); c[2] != "-" || c[9] != "-" {
		t.Fatalf("a server without calls: %q", c)
	}
}

// press is the message of a key typed at the terminal.
func press(k string) tea.KeyPressMsg {
	switch k {
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	}
	r := []rune(k)[0]
	return tea.KeyPressMsg{Code: r, Text: k}
}

// The model's keys, without a terminal.
func TestTopModelKeys(t *testing.T) {
	m := &topModel{view: topView{sortBy: topSortCalls, window: time.Minute}, st: newTopStyles(false), width: 100, height: 12, interval: time.Second}
	m.Update(topFrameMsg(topSample()))
	if v := m.View(); !v.AltScreen || !strings.Contains(v.Content, "› alpha") {
		t.Fatalf("first row selected, full screen (%v):\n%s", v.AltScreen, v.Content)
	}
	m.Update(press("down"))
	if !strings.Contains(m.View().Content, "› beta") {
		t.Fatalf("down selects beta:\n%s", m.View().Content)
	}
	m.key("s")
	if m.view.sortBy != topSortFailures || !strings.Contains(m.View().Content, "sort failure rate") {
		t.Fatalf("sort: %+v", m.view)
	}
	if m.key("f") == nil || m.view.domain != "upstream" {
		t.Fatalf("f filters and reloads: %+v", m.view)
	}
	m.Update(topFailuresMsg{server: "beta"})
	if v := m.View().Content; !strings.Contains(v, "recent failures of beta") || !strings.Contains(v, "no failed calls recorded") {
		t.Fatalf("failures view:\n%s", v)
	}
	m.Update(press("esc"))
	if m.failures != nil {
		t.Fatal("esc goes back")
	}
	if cmd := m.key("q"); cmd == nil {
		t.Fatal("q quits")
	} else if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Fatal("q quits")
	}
	// Keys typed faster than a read: each counts.
	m = &topModel{view: topView{sortBy: topSortCalls, window: time.Minute}, st: newTopStyles(false), width: 100, height: 12, interval: time.Second}
	m.Update(topFrameMsg(topSample()))
	for _, k := range []string{"j", "j", "s", "r"} {
		m.Update(press(k))
	}
	if m.cursor != 2 || m.view.sortBy != topSortFailures || !m.view.reverse {
		t.Fatalf("\"jjsr\": cursor %d, view %+v", m.cursor, m.view)
	}
	m.Update(tea.PasteMsg{Content: "jq"})
	if m.cursor != 2 {
		t.Fatalf("pasted text moved the cursor to %d", m.cursor)
	}
	m.Update(press("k"))
	if _, cmd := m.Update(press("q")); m.cursor != 1 || cmd == nil {
		t.Fatalf("\"kq\": cursor %d, command %v", m.cursor, cmd)
	} else if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Fatal("\"kq\" does not quit")
	}
	if m.Update(press("j")); m.cursor != 1 {
		t.Fatal("a key after q still counts")
	}
	// Narrow terminals clip lines rather than wrap them.
	m.width = 30
	for _, line := range strings.Split(m.View().Content, "\n") {
		if lipgloss.Width(line) > 30 {
			t.Fatalf("line wider than the terminal: %q", line)
		}
	}
}

// Without colour the view has no escape codes at all; with it, failing
// rows are coloured and the selection is in reverse video.
func TestTopModelColour(t *testing.T) {
	for _, colour := range []bool{false, true} {
		m := &topModel{view: topView{sortBy: topSortCalls, window: time.Minute}, st: newTopStyles(colour), width: 100, height: 12, interval: time.Second}
		m.Update(topFrameMsg(topSample()))
		s := m.View().Content
		if !colour {
			if strings.Contains(s, "\x1b") {
				t.Fatalf("escape codes without colour:\n%q", s)
			}
			continue
		}
		for _, code := range []string{"7", "31", "33"} {
			if !regexp.MustCompile(`\x1b\[([0-9]+;)*` + code + `[;m]`).MatchString(s) {
				t.Fatalf("want reverse video, red and yellow rows; no SGR %s in:\n%q", code, s)
			}
		}
	}
}
