package health

import (
	"sync"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/callerr"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)} }

var (
	ok   = callerr.Classification{}
	h502 = callerr.Classification{Class: callerr.ClassHTTP, Domain: callerr.DomainUpstream, HTTPStatus: 502}
	tout = callerr.Classification{Class: callerr.ClassTimeout, Domain: callerr.DomainUpstream}
)

func TestThresholds(t *testing.T) {
	tests := []struct {
		name     string
		calls    []callerr.Classification
		degraded bool
		summary  string
		dominant string
	}{
		{"no calls", nil, false, "", ""},
		{"4 calls all failed", []callerr.Classification{h502, h502, h502, h502}, false, "4 of 4 tool calls failed in the last 5 min (mostly http)", "http"},
		{"5 calls 3 failed", []callerr.Classification{ok, ok, h502, h502, tout}, true, "3 of 5 tool calls failed in the last 5 min (mostly http)", "http"},
		{"exactly half", []callerr.Classification{ok, ok, ok, h502, h502, tout}, false, "3 of 6 tool calls failed in the last 5 min (mostly http)", "http"},
		{"5 calls none failed", []callerr.Classification{ok, ok, ok, ok, ok}, false, "0 of 5 tool calls failed in the last 5 min", ""},
		{"tie broken by name", []callerr.Classification{h502, tout, h502, tout, tout, h502}, true, "6 of 6 tool calls failed in the last 5 min (mostly http)", "http"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker(newClock().now)
			for _, c := range tt.calls {
				tr.Observe("docs", c)
			}
			s := tr.Snapshot("docs")
			if s.Degraded != tt.degraded || s.Summary != tt.summary || s.DominantClass != tt.dominant {
				t.Errorf("Snapshot = %+v, want degraded=%v summary=%q dominant=%q", s, tt.degraded, tt.summary, tt.dominant)
			}
		})
	}
}

func TestExcludedOutcomes(t *testing.T) {
	tests := []struct {
		class, domain string
		counted       bool
	}{
		{callerr.ClassToolError, "", false},
		{callerr.ClassProxyPolicy, "", false},
		{callerr.ClassCancelled, "", false},
		{callerr.ClassAuth, "", false},
		{"", "", true},
		{callerr.ClassNetwork, "", true},
		{callerr.ClassTimeout, "", true},
		{callerr.ClassTimeout, callerr.DomainUpstream, true},
		{callerr.ClassTimeout, callerr.DomainClient, false}, // the caller's own deadline
		{callerr.ClassHTTP, "", true},
		{callerr.ClassJSONRPC, "", true},
		{callerr.ClassSessionTerminated, "", true},
		{callerr.ClassProxyInternal, "", true},
	}
	for _, tt := range tests {
		tr := NewTracker(newClock().now)
		for range 10 {
			tr.Observe("docs", callerr.Classification{Class: tt.class, Domain: tt.domain})
		}
		if got := tr.Snapshot("docs").Calls; (got == 10) != tt.counted {
			t.Errorf("class %q domain %q: %d calls counted, counted=%v", tt.class, tt.domain, got, tt.counted)
		}
	}
}

func TestWindowExpiryRecovers(t *testing.T) {
	c := newClock()
	tr := NewTracker(c.now)
	for range 6 {
		tr.Observe("docs", h502)
	}
	if !tr.Snapshot("docs").Degraded {
		t.Fatal("not degraded after 6 failures")
	}
	c.advance(Window - BucketWidth)
	if !tr.Snapshot("docs").Degraded {
		t.Fatal("recovered before the window passed")
	}
	// Successes in a later bucket dilute but the old failures still count.
	for range 6 {
		tr.Observe("docs", ok)
	}
	if s := tr.Snapshot("docs"); s.Degraded || s.Calls != 12 {
		t.Errorf("with 6 of 12 failed: %+v", s)
	}
	c.advance(BucketWidth)
	if s := tr.Snapshot("docs"); s.Calls != 6 || s.Failed != 0 || s.Degraded {
		t.Errorf("after the failures left the window: %+v", s)
	}
	c.advance(Window)
	if s := tr.Snapshot("docs"); s.Calls != 0 || s.Summary != "" {
		t.Errorf("after everything expired: %+v", s)
	}
	// A reused bucket slot starts from zero.
	tr.Observe("docs", h502)
	if s := tr.Snapshot("docs"); s.Calls != 1 || s.Failed != 1 {
		t.Errorf("reused slot: %+v", s)
	}
}

func TestServersAreSeparateAndDrop(t *testing.T) {
	tr := NewTracker(newClock().now)
	for range 5 {
		tr.Observe("bad", tout)
		tr.Observe("good", ok)
	}
	if !tr.Snapshot("bad").Degraded || tr.Snapshot("good").Degraded {
		t.Fatal("servers not kept apart")
	}
	tr.Drop("bad")
	if s := tr.Snapshot("bad"); s.Calls != 0 {
		t.Errorf("after Drop: %+v", s)
	}
}

func TestCombine(t *testing.T) {
	degraded := Stats{Calls: 5, Failed: 3, Degraded: true, Summary: "3 of 5 tool calls failed in the last 5 min (mostly http)"}
	fine := Stats{Calls: 5, Summary: "0 of 5 tool calls failed in the last 5 min"}
	tests := []struct {
		conn      string
		s         Stats
		state     string
		summaryOK bool
	}{
		{"ready", degraded, StateDegraded, true},
		{"ready", fine, StateReady, true},
		{"ready", Stats{}, StateReady, false},
		{"disabled", degraded, "disabled", false},
		{"connecting", degraded, "connecting", false},
		{"error", degraded, "error", false},
		{"auth_required", degraded, "auth_required", false},
	}
	for _, tt := range tests {
		state, summary := Combine(tt.conn, tt.s)
		if state != tt.state || (summary != "") != tt.summaryOK || (tt.summaryOK && summary != tt.s.Summary) {
			t.Errorf("Combine(%q, %+v) = %q, %q", tt.conn, tt.s, state, summary)
		}
	}
}

func TestConcurrentObserve(t *testing.T) {
	tr := NewTracker(nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				tr.Observe("docs", h502)
				_ = tr.Snapshot("docs")
			}
		}()
	}
	wg.Wait()
	if s := tr.Snapshot("docs"); s.Calls != 800 {
		t.Errorf("calls = %d, want 800", s.Calls)
	}
}

// TestAddReplays: calls counted at their own times (a replay of the
// activity log) land in the window as they would have live; one older
// than the window, or than what its slot holds, counts for nothing.
func TestAddReplays(t *testing.T) {
	c := newClock()
	tr := NewTracker(c.now)
	now := c.now()
	tr.Add("docs", h502, now.Add(-Window-time.Second), 1) // before the window
	tr.Add("docs", h502, now.Add(-4*time.Minute), 1)
	tr.Add("docs", ok, now.Add(-time.Minute), 1)
	tr.Add("docs", h502, now.Add(-time.Second), 2)
	tr.Add("docs", ok, now.Add(-time.Second), 0) // nothing
	tr.Observe("docs", h502)
	// The slot of 4 minutes ago holds that bucket; a call a whole
	// window before it maps to the same slot and is dropped.
	tr.Add("docs", h502, now.Add(-4*time.Minute-Window), 1)
	got := tr.Snapshot("docs")
	if got.Calls != 5 || got.Failed != 4 || !got.Degraded {
		t.Errorf("replayed window: %+v, want 5 calls, 4 failed, degraded", got)
	}
}
