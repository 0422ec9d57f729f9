package commands

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/chart"
	"github.com/mcpx-dev/mcpx/internal/livestats"
	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
)

var topCommand = &cli.Command{
	Name:  "top",
	Usage: "live view of proxyd: calls, errors and latency per server",
	Description: `A full-screen view that follows proxyd's activity stream: one row per
server with its state, calls per second, failure rate and failures by
error class, p50 and p99 latency with a sparkline of p99 over the window,
and the session re-initialisations and token refreshes proxyd counted.

Keys: ↑/↓ (or k/j) select a server, enter shows its recent failures (the
activity records), s changes the sort (server, calls/s, failure rate,
p99), r reverses it, f steps the fault-domain filter (all, upstream,
proxy, client), esc goes back, q quits.

When stdout is not a terminal (or with --plain) it prints the same figures
as a plain table every --interval instead, --count times (0: until
interrupted). Colour follows the terminal, never with NO_COLOR or
--no-color.

Examples:
   mcpx top
   mcpx top --window 15m --interval 5s
   mcpx top --plain --count 1          # one table, e.g. for a script
   mcpx top --count 3 | tee top.log`,
	Flags: []cli.Flag{
		&cli.DurationFlag{Name: "interval", Value: 2 * time.Second, Usage: "refresh every `D`"},
		&cli.DurationFlag{Name: "window", Value: 5 * time.Minute, Usage: "figures cover the last `D` (at least 30s)"},
		&cli.BoolFlag{Name: "plain", Usage: "print periodic tables even on a terminal"},
		&cli.IntFlag{Name: "count", Value: 0, Usage: "plain mode: stop after `N` tables (0: until interrupted)"},
		&cli.StringFlag{Name: "fault-domain", Usage: "start filtered to `DOMAIN`: upstream, proxy or client"},
	},
	Action: runTop,
}

// topBuckets is the number of points of a row's sparkline.
const topBuckets = 30

// topDomains are the fault-domain filter's steps ("" is all).
var topDomains = append([]string{""}, callerr.Domains...)

func runTop(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErr("top takes no arguments")
	}
	interval, window := c.Duration("interval"), c.Duration("window")
	if interval < 100*time.Millisecond {
		return usageErr("--interval must be at least 100ms")
	}
	if window < 30*time.Second {
		return usageErr("--window must be at least 30s")
	}
	if c.Int("count") < 0 {
		return usageErr("--count must not be negative")
	}
	domain := c.String("fault-domain")
	if !slices.Contains(topDomains, domain) {
		return usageErr("--fault-domain %q is not one of: %s", domain, strings.Join(callerr.Domains, ", "))
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	src := newTopSource(newClient(c), window)
	// Fail fast with the usual message when proxyd is not there.
	if _, err := src.cl.Status(ctx); err != nil {
		return daemonErr(err)
	}
	go src.follow(ctx)
	view := topView{sortBy: topSortCalls, domain: domain, window: window}
	if f, ok := c.App.Writer.(*os.File); ok && isatty.IsTerminal(f.Fd()) && !c.Bool("plain") {
		return runTopTUI(ctx, c, src, view, interval)
	}
	return runTopPlain(ctx, c, src, view, interval)
}

// topSource follows proxyd's activity into a rolling window and reads the
// servers' states and counters on demand.
type topSource struct {
	cl     *api.Client
	window time.Duration

	mu         sync.Mutex
	replica    string // the proxyd's id among replicas sharing a record
	win        *livestats.Window
	backfilled bool // the window holds the store's records
	streamErr  error
}

func newTopSource(cl *api.Client, window time.Duration) *topSource {
	return &topSource{cl: cl, window: window, win: livestats.New(window, window/topBuckets)}
}

// follow keeps the window filled until ctx ends: the window's worth of
// records from the store, then the live stream; after a lost connection
// (a restarted proxyd) it starts over.
func (s *topSource) follow(ctx context.Context) {
	for ctx.Err() == nil {
		err := s.followOnce(ctx)
		s.mu.Lock()
		s.streamErr = err
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (s *topSource) followOnce(ctx context.Context) error {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The live stream starts first so that nothing falls between the
	// backfill and it; records seen twice are told apart by id.
	live := make(chan api.ActivityRecord, 4096)
	ferr := make(chan error, 1)
	go func() {
		ferr <- streamEach(s.cl.FollowActivity(fctx, api.ActivityQuery{}))(func(r api.ActivityRecord) error {
			select {
			case live <- r:
				return nil
			case <-fctx.Done():
				return fctx.Err()
			}
		})
	}()
	win := livestats.New(s.window, s.window/topBuckets)
	var lastID int64
	add := func(r api.ActivityRecord) error {
		if r.ID != 0 && r.ID <= lastID {
			return nil
		}
		lastID = max(lastID, r.ID)
		win.Add(livestats.Call{ID: r.ID, Time: r.Time, Server: r.Server, DurationMS: r.DurationMS,
			Failed: r.Status == api.StatusError, ErrorClass: r.ErrorClass, FaultDomain: r.FaultDomain,
			Reinit: r.Reinit, TokenRefresh: r.TokenRefresh})
		return nil
	}
	// The live stream carries this proxyd's own calls; so does the
	// backfill, not other replicas' on a shared record (whose ids can
	// also commit out of order with its own).
	backfill := api.ActivityQuery{Since: time.Now().Add(-s.window)}
	if own := replicaOf(fctx, s.cl); own != "" {
		backfill.Replicas = []string{own}
		s.mu.Lock()
		s.replica = own
		s.mu.Unlock()
	}
	if err := streamEach(s.cl.ExportActivity(fctx, backfill))(add); err != nil {
		return err
	}
	s.mu.Lock()
	s.win, s.backfilled, s.streamErr = win, true, nil
	s.mu.Unlock()
	for {
		select {
		case r := <-live:
			_ = add(r) // the window locks itself
		case err := <-ferr:
			if err == nil {
				err = fmt.Errorf("proxyd ended the activity stream")
			}
			return err
		case <-ctx.Done():
			return nil
		}
	}
}

// ownCalls narrows q to the calls of the proxyd top shows, once known.
func (s *topSource) ownCalls(q api.ActivityQuery) api.ActivityQuery {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.replica != "" {
		q.Replicas = []string{s.replica}
	}
	return q
}

// topRow is one server's line.
type topRow struct {
	Server    string
	State     api.State
	Stats     livestats.Stats
	Reinits   int64
	Refreshes int64 // -1: the server has no OAuth sign-in
}

// topFrame is what one refresh shows.
type topFrame struct {
	At        time.Time
	Version   string
	Rows      []topRow
	Err       error // proxyd did not answer
	StreamErr error // the activity stream is down (figures may be stale)
}

// frame reads the servers from proxyd and joins the window's figures.
func (s *topSource) frame(ctx context.Context, domain string) topFrame {
	f := topFrame{At: time.Now()}
	st, err := s.cl.Status(ctx)
	if err != nil {
		f.Err = err
		return f
	}
	f.Version = st.Version
	refreshes := map[string]int64{}
	if auth, err := s.cl.AuthStatus(ctx, ""); err == nil {
		for _, a := range auth {
			if a.SignedIn {
				refreshes[a.Server] = a.TokenRequests
			}
		}
	}
	s.mu.Lock()
	stats := s.win.Snapshot(f.At, domain)
	f.StreamErr = s.streamErr
	s.mu.Unlock()
	byServer := map[string]livestats.Stats{}
	for _, x := range stats {
		byServer[x.Server] = x
	}
	for _, srv := range st.Servers {
		r := topRow{Server: srv.Name, State: srv.State, Stats: byServer[srv.Name], Reinits: srv.Reinits, Refreshes: -1}
		if n, ok := refreshes[srv.Name]; ok {
			r.Refreshes = n
		}
		f.Rows = append(f.Rows, r)
	}
	return f
}

// Sort keys of the view.
const (
	topSortServer = iota
	topSortCalls
	topSortFailures
	topSortP99
	topSorts
)

var topSortNames = []string{"server", "calls/s", "failure rate", "p99"}

// topView is what the user chose to see.
type topView struct {
	sortBy  int
	reverse bool
	domain  string
	window  time.Duration
}

// rows sorts and filters a frame's rows: with a fault domain, only the
// servers with failures in it.
func (v topView) rows(f topFrame) []topRow {
	var out []topRow
	for _, r := range f.Rows {
		if v.domain == "" || r.Stats.Failed > 0 {
			out = append(out, r)
		}
	}
	less := func(a, b topRow) bool {
		switch v.sortBy {
		case topSortCalls:
			if a.Stats.PerSecond != b.Stats.PerSecond {
				return a.Stats.PerSecond > b.Stats.PerSecond
			}
		case topSortFailures:
			if ra, rb := failureRate(a.Stats), failureRate(b.Stats); ra != rb {
				return ra > rb
			}
		case topSortP99:
			if a.Stats.P99MS != b.Stats.P99MS {
				return a.Stats.P99MS > b.Stats.P99MS
			}
		}
		return a.Server < b.Server
	}
	sort.SliceStable(out, func(i, j int) bool {
		if v.reverse {
			return less(out[j], out[i])
		}
		return less(out[i], out[j])
	})
	return out
}

func failureRate(s livestats.Stats) float64 {
	if s.Calls == 0 {
		return 0
	}
	return float64(s.Failed) / float64(s.Calls)
}

// topCells are a row's columns as text, shared by both modes.
func topCells(r topRow) []string {
	s := r.Stats
	cells := []string{redact.Control(r.Server), string(r.State), "-", "-", "-", "-", "-", "", strconv.FormatInt(r.Reinits, 10), "-"}
	if s.Calls > 0 {
		cells[2] = fmt.Sprintf("%.2f", s.PerSecond)
		cells[3] = fmt.Sprintf("%.1f%%", failureRate(s)*100)
		cells[4] = classCounts(s.FailedBy)
		cells[5] = chart.FormatMS(s.P50MS)
		cells[6] = chart.FormatMS(s.P99MS)
		cells[7] = chart.Sparkline(s.P99Series)
	}
	if r.Refreshes >= 0 {
		cells[9] = strconv.FormatInt(r.Refreshes, 10)
	}
	return cells
}

var topHeaders = []string{"SERVER", "STATE", "CALLS/S", "FAIL%", "FAILURES", "P50", "P99", "P99 TREND", "REINITS", "REFRESHES"}

// classCounts prints failures by class, most first: "http 3, timeout 1".
func classCounts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", dash(k), m[k])
	}
	return strings.Join(parts, ", ")
}

// topTitle is the first line of both modes.
func topTitle(f topFrame, v topView, shown int) string {
	domain := "all"
	if v.domain != "" {
		domain = v.domain
	}
	order := "↓"
	if v.reverse {
		order = "↑"
	}
	s := fmt.Sprintf("mcpx top · %s · %d of %d servers · window %s · sort %s %s · domain %s",
		f.At.Format("15:04:05"), shown, len(f.Rows), v.window, topSortNames[v.sortBy], order, domain)
	if f.StreamErr != nil {
		s += " · activity stream down: " + redact.Control(f.StreamErr.Error())
	}
	return s
}

// runTopPlain prints a table every interval.
func runTopPlain(ctx context.Context, c *cli.Context, src *topSource, v topView, interval time.Duration) error {
	w := c.App.Writer
	// Let the backfill land before the first table.
	waitBackfill(ctx, src, interval)
	for i := 0; ; i++ {
		f := src.frame(ctx, v.domain)
		if f.Err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return daemonErr(f.Err)
		}
		if err := topPlainTable(w, f, v); err != nil {
			return err
		}
		if n := c.Int("count"); n > 0 && i+1 >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// waitBackfill waits up to d for the first backfill.
func waitBackfill(ctx context.Context, src *topSource, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		src.mu.Lock()
		done := src.backfilled || src.streamErr != nil
		src.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func topPlainTable(w io.Writer, f topFrame, v topView) error {
	rows := v.rows(f)
	fmt.Fprintln(w, topTitle(f, v, len(rows)))
	t := newTable(w, topHeaders...)
	for _, r := range rows {
		_ = t.Append(topCells(r))
	}
	if err := t.Render(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}
