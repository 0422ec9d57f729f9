// Package health keeps a rolling window of tool-call outcomes per server and
// turns a server whose calls mostly fail from ready into degraded.
package health

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/callerr"
)

// Thresholds. A server is degraded when its window holds at least MinCalls
// counted calls and more than FailureRatio of them failed.
const (
	Window       = 5 * time.Minute
	BucketWidth  = 10 * time.Second
	MinCalls     = 5
	FailureRatio = 0.5
)

const buckets = int(Window / BucketWidth)

// States Combine produces besides the connection's own.
const (
	StateReady    = "ready"
	StateDegraded = "degraded"
)

// excluded classes say nothing about the server's health: the tool's own
// error result, proxyd's refusals, cancellations, and sign-in needs (the
// auth state reports those).
var excluded = map[string]bool{
	callerr.ClassToolError:   true,
	callerr.ClassProxyPolicy: true,
	callerr.ClassCancelled:   true,
	callerr.ClassAuth:        true,
}

// Counted reports whether an outcome counts toward health: not an
// excluded class, nor anything the client brought on itself (a deadline
// of its own shorter than the server's, a wrong request).
func Counted(c callerr.Classification) bool {
	return !excluded[c.Class] && c.Domain != callerr.DomainClient
}

type bucket struct {
	idx    int64 // which BucketWidth slot of time this holds
	calls  int
	failed int
	byCls  map[string]int
}

type window struct{ b [buckets]bucket }

// Tracker holds a window per server; it is safe for concurrent use.
type Tracker struct {
	now func() time.Time
	mu  sync.Mutex
	srv map[string]*window
}

// NewTracker uses now as its clock (time.Now when nil).
func NewTracker(now func() time.Time) *Tracker {
	if now == nil {
		now = time.Now
	}
	return &Tracker{now: now, srv: make(map[string]*window)}
}

func slot(t time.Time) int64 { return t.UnixNano() / int64(BucketWidth) }

// Observe counts one finished call: a success when c.Class is empty, a
// failure otherwise, nothing for excluded classes.
func (t *Tracker) Observe(server string, c callerr.Classification) {
	t.Add(server, c, t.now(), 1)
}

// Add counts n calls that finished at a given time: the activity log
// replayed into a new tracker. A time older than its slot's bucket is
// outside the window already and counts for nothing.
func (t *Tracker) Add(server string, c callerr.Classification, at time.Time, n int) {
	if !Counted(c) || n <= 0 {
		return
	}
	idx := slot(at)
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.srv[server]
	if w == nil {
		w = &window{}
		t.srv[server] = w
	}
	b := &w.b[int(idx%int64(buckets))]
	if b.idx > idx {
		return
	}
	if b.idx != idx {
		*b = bucket{idx: idx}
	}
	b.calls += n
	if c.Class != "" {
		b.failed += n
		if b.byCls == nil {
			b.byCls = make(map[string]int, 2)
		}
		b.byCls[c.Class] += n
	}
}

// Stats is a server's window.
type Stats struct {
	Calls         int    `json:"calls"`
	Failed        int    `json:"failed"`
	DominantClass string `json:"dominant_class,omitempty"`
	Degraded      bool   `json:"degraded"`
	Summary       string `json:"summary,omitempty"`
}

// Snapshot sums the buckets inside the window ending now.
func (t *Tracker) Snapshot(server string) Stats {
	now := slot(t.now())
	var s Stats
	classes := map[string]int{}
	t.mu.Lock()
	if w := t.srv[server]; w != nil {
		for i := range w.b {
			b := &w.b[i]
			if b.calls == 0 || b.idx <= now-int64(buckets) || b.idx > now {
				continue
			}
			s.Calls += b.calls
			s.Failed += b.failed
			for c, n := range b.byCls {
				classes[c] += n
			}
		}
	}
	t.mu.Unlock()
	s.DominantClass = dominant(classes)
	s.Degraded = s.Calls >= MinCalls && float64(s.Failed) > FailureRatio*float64(s.Calls)
	if s.Calls > 0 {
		s.Summary = fmt.Sprintf("%d of %d tool calls failed in the last %d min", s.Failed, s.Calls, int(Window/time.Minute))
		if s.DominantClass != "" {
			s.Summary += fmt.Sprintf(" (mostly %s)", s.DominantClass)
		}
	}
	return s
}

// dominant is the most frequent class, ties broken by name for stable output.
func dominant(classes map[string]int) string {
	names := make([]string, 0, len(classes))
	for c := range classes {
		names = append(names, c)
	}
	sort.Strings(names)
	best := ""
	for _, c := range names {
		if best == "" || classes[c] > classes[best] {
			best = c
		}
	}
	return best
}

// Drop forgets a server's window (the server was removed).
func (t *Tracker) Drop(server string) {
	t.mu.Lock()
	delete(t.srv, server)
	t.mu.Unlock()
}

// Combine merges the connection state with the call window. Any state other
// than ready (connecting, error, disabled, sign-in needed, ...) wins and is
// returned as is; a ready server whose window is degraded becomes degraded.
// The summary is the window's, when it has one.
func Combine(connState string, s Stats) (state, summary string) {
	if connState != StateReady {
		return connState, ""
	}
	if s.Degraded {
		return StateDegraded, s.Summary
	}
	return StateReady, s.Summary
}
