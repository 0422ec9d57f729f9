package proxyd

import (
	"context"
	"sync"
	"time"
)

// A call through the MCP endpoint is answered before it is recorded: the
// activity record, health, metrics and the span's end are bookkeeping the
// client need not wait for. answered keeps the records readable as soon
// as their calls are answered: a reader (mcpx activity, status, health,
// /metrics) waits for the bookkeeping of the calls answered before it
// asked, which takes microseconds, and not for calls answered after.
type answered struct {
	mu  sync.Mutex
	cur *recordGen
}

// recordGen counts the calls answered, not yet recorded, since the last
// reader arrived; sealed by the next reader, done when the count is zero.
type recordGen struct {
	n      int
	sealed bool
	done   chan struct{}
}

// settleBound bounds a reader's wait, should bookkeeping stall.
const settleBound = time.Second

// hold registers a call whose bookkeeping record will do, and returns the
// function that runs it (once; run it on every path).
func (a *answered) hold(record func()) func() {
	a.mu.Lock()
	if a.cur == nil {
		a.cur = &recordGen{done: make(chan struct{})}
	}
	g := a.cur
	g.n++
	a.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			record()
			a.mu.Lock()
			if g.n--; g.n == 0 && g.sealed {
				close(g.done)
			}
			a.mu.Unlock()
		})
	}
}

// wait returns once every call answered so far is recorded (or after
// settleBound, or when ctx ends).
func (a *answered) wait(ctx context.Context) {
	a.mu.Lock()
	g := a.cur
	if g == nil || g.n == 0 {
		a.mu.Unlock()
		return
	}
	g.sealed = true
	a.cur = nil
	a.mu.Unlock()
	t := time.NewTimer(settleBound)
	defer t.Stop()
	select {
	case <-g.done:
	case <-t.C:
	case <-ctx.Done():
	}
}
