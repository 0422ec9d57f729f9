package commands

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// runTopTUI runs the full-screen view until the user quits or ctx ends.
func runTopTUI(ctx context.Context, c *cli.Context, src *topSource, v topView, interval time.Duration) error {
	// Keys come from the terminal even when stdin is redirected.
	tty, ttyOut, err := tea.OpenTTY()
	if err != nil {
		return fmt.Errorf("terminal view: %w", err)
	}
	defer tty.Close()
	defer ttyOut.Close()
	m := &topModel{ctx: ctx, src: src, view: v, interval: interval, st: newTopStyles(colorEnabled(c)), width: 120, height: 30}
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithOutput(c.App.Writer), tea.WithInput(tty))
	_, err = p.Run()
	if ctx.Err() != nil {
		return nil // interrupted: a normal way to leave
	}
	if err != nil {
		return fmt.Errorf("terminal view: %w", err)
	}
	return m.err
}

type topStyles struct {
	title, header, plain, dim, bad, warn lipgloss.Style
	colour                               bool // the selection in reverse video
}

// newTopStyles are the view's styles; without colour, no attributes at
// all (the selection is still marked by its arrow).
func newTopStyles(colour bool) topStyles {
	plain := lipgloss.NewStyle()
	if !colour {
		return topStyles{title: plain, header: plain, plain: plain, dim: plain, bad: plain, warn: plain}
	}
	return topStyles{
		colour: true,
		title:  plain.Bold(true),
		header: plain.Bold(true).Underline(true),
		plain:  plain,
		dim:    plain.Faint(true),
		bad:    plain.Foreground(lipgloss.Color("1")),
		warn:   plain.Foreground(lipgloss.Color("3")),
	}
}

// Messages of the view.
type (
	topTickMsg     struct{}
	topFrameMsg    topFrame
	topFailuresMsg struct {
		server string
		recs   []api.ActivityRecord
		err    error
	}
)

// topModel is the Bubble Tea model: the server table, or one server's
// recent failures.
type topModel struct {
	ctx      context.Context
	src      *topSource
	view     topView
	interval time.Duration
	st       topStyles

	width, height int
	frame         topFrame
	rows          []topRow
	cursor        int
	failures      *topFailuresMsg // the failures view when set
	quitting      bool
	err           error
}

func (m *topModel) Init() tea.Cmd { return m.load() }

// load reads a frame off the UI goroutine.
func (m *topModel) load() tea.Cmd {
	domain := m.view.domain
	return func() tea.Msg { return topFrameMsg(m.src.frame(m.ctx, domain)) }
}

func (m *topModel) tick() tea.Cmd {
	return tea.Tick(m.interval, func(time.Time) tea.Msg { return topTickMsg{} })
}

// loadFailures reads a server's recent failed calls.
func (m *topModel) loadFailures(server string) tea.Cmd {
	q := api.ActivityQuery{Servers: []string{server}, Statuses: []string{api.StatusError}, Limit: 200}
	if m.view.domain != "" {
		q.FaultDomains = []string{m.view.domain}
	}
	return func() tea.Msg {
		recs, err := m.src.cl.Activity(m.ctx, m.src.ownCalls(q))
		return topFailuresMsg{server: server, recs: recs, err: err}
	}
}

func (m *topModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case topTickMsg:
		return m, m.load()
	case topFrameMsg:
		f := topFrame(msg)
		if f.Err != nil {
			// proxyd went away: keep the last figures, say so, retry.
			f.Rows = m.frame.Rows
		}
		m.frame = f
		m.rows = m.view.rows(m.frame)
		m.cursor = min(m.cursor, max(len(m.rows)-1, 0))
		return m, m.tick()
	case topFailuresMsg:
		m.failures = &msg
	case tea.KeyPressMsg:
		// Keys typed faster than the terminal is read ("jjs") come one
		// message each; pasted text comes as a tea.PasteMsg and is not a
		// command.
		return m, m.key(msg.String())
	}
	return m, nil
}

func (m *topModel) key(k string) tea.Cmd {
	if m.quitting {
		return nil // keys typed after q no longer matter
	}
	switch k {
	case "q", "ctrl+c":
		m.quitting = true
		return tea.Quit
	}
	if m.failures != nil {
		switch k {
		case "esc", "backspace", "left", "h":
			m.failures = nil
		}
		return nil
	}
	switch k {
	case "up", "k":
		m.cursor = max(m.cursor-1, 0)
	case "down", "j":
		m.cursor = min(m.cursor+1, max(len(m.rows)-1, 0))
	case "s":
		m.view.sortBy = (m.view.sortBy + 1) % topSorts
		m.rows = m.view.rows(m.frame)
	case "r":
		m.view.reverse = !m.view.reverse
		m.rows = m.view.rows(m.frame)
	case "f":
		for i, d := range topDomains {
			if d == m.view.domain {
				m.view.domain = topDomains[(i+1)%len(topDomains)]
				break
			}
		}
		m.cursor = 0
		return m.load()
	case "enter", "right", "l":
		if m.cursor < len(m.rows) {
			return m.loadFailures(m.rows[m.cursor].Server)
		}
	}
	return nil
}

// View is the screen, full-window as long as top runs.
func (m *topModel) View() tea.View {
	v := tea.NewView(m.screen())
	v.AltScreen = true
	return v
}

// screen is the text of the current view.
func (m *topModel) screen() string {
	if m.failures != nil {
		return m.failuresView()
	}
	var b strings.Builder
	b.WriteString(m.st.title.Render(clip(topTitle(m.frame, m.view, len(m.rows)), m.width)) + "\n")
	if m.frame.Err != nil {
		b.WriteString(m.st.bad.Render(clip("proxyd does not answer: "+redact.Control(m.frame.Err.Error())+" (retrying)", m.width)) + "\n")
	}
	cells := [][]string{topHeaders}
	for _, r := range m.rows {
		cells = append(cells, topCells(r))
	}
	widths := columnWidths(cells)
	b.WriteString(m.st.header.Render(clip("  "+joinCells(cells[0], widths), m.width)) + "\n")
	visible := max(m.height-5, 1)
	first := max(0, m.cursor-visible+1)
	for i := first; i < len(m.rows) && i < first+visible; i++ {
		line := clip(joinCells(cells[i+1], widths), m.width-2)
		style := m.st.plain
		switch st := m.rows[i].Stats; {
		case st.Failed > 0 && failureRate(st) > 0.5:
			style = m.st.bad
		case st.Failed > 0:
			style = m.st.warn
		}
		mark := "  "
		if i == m.cursor {
			mark, style = "› ", style.Reverse(m.st.colour)
		}
		b.WriteString(mark + style.Render(line))
		b.WriteString("\n")
	}
	if len(m.rows) == 0 {
		msg := "no servers configured"
		if m.view.domain != "" {
			msg = "no server has " + m.view.domain + " failures in the window"
		}
		b.WriteString("  " + m.st.dim.Render(msg) + "\n")
	}
	for n := strings.Count(b.String(), "\n"); n < m.height-1; n++ {
		b.WriteString("\n")
	}
	b.WriteString(m.st.dim.Render(clip("↑/↓ select · enter failures · s sort · r reverse · f fault domain · q quit", m.width)))
	return b.String()
}

func (m *topModel) failuresView() string {
	f := m.failures
	var b strings.Builder
	domain := "all"
	if m.view.domain != "" {
		domain = m.view.domain
	}
	title := fmt.Sprintf("recent failures of %s · domain %s · %d records", redact.Control(f.server), domain, len(f.recs))
	b.WriteString(m.st.title.Render(clip(title, m.width)) + "\n")
	if f.err != nil {
		b.WriteString(m.st.bad.Render(clip("cannot read the activity: "+redact.Control(f.err.Error()), m.width)) + "\n")
	}
	cells := [][]string{{"ID", "TIME", "TOOL", "CLASS", "DOMAIN", "HTTP", "DURATION", "ERROR"}}
	for _, r := range f.recs {
		httpStatus := "-"
		if r.UpstreamHTTPStatus != 0 {
			httpStatus = strconv.Itoa(r.UpstreamHTTPStatus)
		}
		msg := strings.Join(strings.Fields(redact.Control(r.Error)), " ")
		cells = append(cells, []string{strconv.FormatInt(r.ID, 10), r.Time.Local().Format("15:04:05"), redact.Control(r.Tool),
			dash(r.ErrorClass), dash(r.FaultDomain), httpStatus, fmt.Sprintf("%.1fms", r.DurationMS), dash(msg)})
	}
	widths := columnWidths(cells)
	b.WriteString(m.st.header.Render(clip(joinCells(cells[0], widths), m.width)) + "\n")
	for i, row := range cells[1:] {
		if i >= m.height-4 {
			break
		}
		b.WriteString(m.st.bad.Render(clip(joinCells(row, widths), m.width)) + "\n")
	}
	if len(f.recs) == 0 && f.err == nil {
		b.WriteString(m.st.dim.Render("  no failed calls recorded") + "\n")
	}
	for n := strings.Count(b.String(), "\n"); n < m.height-1; n++ {
		b.WriteString("\n")
	}
	b.WriteString(m.st.dim.Render(clip("esc back · q quit", m.width)))
	return b.String()
}

// columnWidths are the widest cell of each column (the last column is
// left free).
func columnWidths(rows [][]string) []int {
	w := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			w[i] = max(w[i], lipgloss.Width(c))
		}
	}
	return w
}

func joinCells(cells []string, widths []int) string {
	var b strings.Builder
	for i, c := range cells {
		b.WriteString(c)
		if i < len(cells)-1 {
			b.WriteString(strings.Repeat(" ", widths[i]-lipgloss.Width(c)+2))
		}
	}
	return strings.TrimRight(b.String(), " ")
}

// clip cuts s to width display columns.
func clip(s string, width int) string {
	if width <= 0 || lipgloss.Width(s) <= width {
		return s
	}
	r := []rune(s)
	for len(r) > 0 && lipgloss.Width(string(r)) > width-1 {
		r = r[:len(r)-1]
	}
	return string(r) + "…"
}
