package relay

import (
	"sync"
	"sync/atomic"
	"time"
)

// workers runs a parked call's upstream request on a goroutine that has
// run one before. A fresh goroutine starts with a small stack, which the
// way down the HTTP client and back grows (each time copying it) several
// times: in the benchmark that was about a quarter of the CPU time the
// call's own goroutine took. A worker keeps its grown stack between calls
// (until the garbage collector shrinks a stack that stays mostly unused).
type workers struct {
	tasks chan func()
	quit  chan struct{}
	once  sync.Once
	idle  atomic.Int32
	// started counts the goroutines started, to show reuse.
	started atomic.Int64
}

// maxIdleWorkers bounds the goroutines kept waiting for a call; a burst
// beyond it runs on goroutines that end with their call.
const maxIdleWorkers = 64

// workerIdle is how long a worker waits for its next call before ending.
const workerIdle = 30 * time.Second

func newWorkers() *workers {
	return &workers{tasks: make(chan func()), quit: make(chan struct{})}
}

// run runs f on an idle worker, or on a new goroutine when none is idle.
func (w *workers) run(f func()) {
	select {
	case w.tasks <- f:
	default:
		w.started.Add(1)
		go w.loop(f)
	}
}

func (w *workers) loop(f func()) {
	var t *time.Timer
	for {
		f()
		if w.idle.Add(1) > maxIdleWorkers {
			w.idle.Add(-1)
			return
		}
		if t == nil {
			t = time.NewTimer(workerIdle)
		} else {
			t.Reset(workerIdle)
		}
		select {
		case f = <-w.tasks:
			w.idle.Add(-1)
		case <-t.C:
			w.idle.Add(-1)
			return
		case <-w.quit:
			w.idle.Add(-1)
			t.Stop()
			return
		}
	}
}

// close ends the idle workers; a worker busy with a call ends after it.
func (w *workers) close() { w.once.Do(func() { close(w.quit) }) }
