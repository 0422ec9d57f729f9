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
	mu   sync.Mutex
	cur  *recordGen // calls answered since the last reader arrived
	last *recordGen // the generation the last reader sealed
}

// recordGen counts calls answered and not yet recorded; a reader seals
// it (later calls go to the next one), and it is recorded once its count
// is zero. prev is the generation sealed before it, when that one was
// not yet recorded: a reader waits for the chain.
type recordGen struct {
	n        int
	sealed   bool
	recorded bool
	done     chan struct{}
	prev     *recordGen
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
				g.recorded = true
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
	g := a.last
	if c := a.cur; c != nil && c.n > 0 {
		c.sealed = true
		if g != nil && !g.recorded {
			c.prev = g
		}
		a.last, a.cur, g = c, nil, c
	}
	a.mu.Unlock()
	t := time.NewTimer(settleBound)
	defer t.Stop()
	for x := g; x != nil; {
		select {
		case <-x.done:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
		a.mu.Lock()
		x = x.prev
		a.mu.Unlock()
	}
	if g != nil {
		a.mu.Lock()
		g.prev = nil // all recorded: let the chain go
		a.mu.Unlock()
	}
}
