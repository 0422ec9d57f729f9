package commands

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

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

// The model's keys, without a terminal.
func TestTopModelKeys(t *testing.T) {
	r := lipgloss.NewRenderer(&strings.Builder{})
	r.SetColorProfile(termenv.Ascii)
	m := &topModel{view: topView{sortBy: topSortCalls, window: time.Minute}, st: newTopStyles(r), width: 100, height: 12, interval: time.Second}
	m.Update(topFrameMsg(topSample()))
	if !strings.Contains(m.View(), "› alpha") {
		t.Fatalf("first row selected:\n%s", m.View())
	}
	m.Update(tea.KeyMsg{Type: tea.KeyDown})
	if !strings.Contains(m.View(), "› beta") {
		t.Fatalf("down selects beta:\n%s", m.View())
	}
	m.key("s")
	if m.view.sortBy != topSortFailures || !strings.Contains(m.View(), "sort failure rate") {
		t.Fatalf("sort: %+v", m.view)
	}
	if m.key("f") == nil || m.view.domain != "upstream" {
		t.Fatalf("f filters and reloads: %+v", m.view)
	}
	m.Update(topFailuresMsg{server: "beta"})
	if v := m.View(); !strings.Contains(v, "recent failures of beta") || !strings.Contains(v, "no failed calls recorded") {
		t.Fatalf("failures view:\n%s", v)
	}
	m.key("esc")
	if m.failures != nil {
		t.Fatal("esc goes back")
	}
	if cmd := m.key("q"); cmd == nil {
		t.Fatal("q quits")
	} else if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Fatal("q quits")
	}
	// Keys typed faster than a read arrive as one run of runes: each counts.
	m = &topModel{view: topView{sortBy: topSortCalls, window: time.Minute}, st: newTopStyles(r), width: 100, height: 12, interval: time.Second}
	m.Update(topFrameMsg(topSample()))
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("jjsr")})
	if m.cursor != 2 || m.view.sortBy != topSortFailures || !m.view.reverse {
		t.Fatalf("one read of \"jjsr\": cursor %d, view %+v", m.cursor, m.view)
	}
	if _, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")}); cmd == nil {
		t.Fatal("q quits")
	}
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("jq"), Paste: true})
	if m.cursor != 2 {
		t.Fatalf("pasted text moved the cursor to %d", m.cursor)
	}
	_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("kq")})
	if m.cursor != 1 || cmd == nil {
		t.Fatalf("\"kq\" in one read: cursor %d, command %v", m.cursor, cmd)
	} else if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Fatal("\"kq\" in one read does not quit")
	}
	// Narrow terminals clip lines rather than wrap them.
	m.width = 30
	for _, line := range strings.Split(m.View(), "\n") {
		if lipgloss.Width(line) > 30 {
			t.Fatalf("line wider than the terminal: %q", line)
		}
	}
}
