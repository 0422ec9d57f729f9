// Package procs decides how many processors (GOMAXPROCS) proxyd's Go
// code runs on: one while it relays one call at a time, the runtime's
// choice once calls overlap, and one more for each lowered activity
// writer while it needs one. A GOMAXPROCS set in the environment is left
// as it is.
//
// Why one: a relayed call passes through several goroutines (the
// client's connection, net/http's body and connection loops, the
// upstream's stream readers). With more than one processor, each
// goroutine made ready wakes another thread to run it on another core,
// and those wake-ups, not the work, were most of what proxyd added to a
// lone call over a bare reverse proxy (benchmark in the README,
// "Performance"). With one processor the next goroutine runs on the
// thread that readied it. Two calls at once need the cores: the first
// call that overlaps another raises the count before it goes on, and
// the count drops back after quietAfter without overlapping calls.
//
// Each change stops the world, which on a busy machine takes from tens
// of microseconds to milliseconds; a call it stops is likely among
// proxyd's slowest. So background work that would hold the one processor
// does not take another for itself while the calls come one at a time:
// it runs on theirs in small pieces, each in a moment with no request or
// call in flight (Lone, WaitQuiet).
package procs

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// quietAfter is how long proxyd relays no two calls at once before it
// goes back to one processor: long enough that a burst's gaps do not
// flip the count (each change stops the world for a moment).
var quietAfter = time.Second

var st struct {
	inflight   atomic.Int64
	on         atomic.Bool  // following > 0
	busy       atomic.Bool  // the runtime's choice is in force
	overlapped atomic.Bool  // two calls ran at once since the last check
	serving    atomic.Int64 // requests in flight (Serve)
	waiting    atomic.Bool  // quiet holds a channel for WaitQuiet

	quietMu sync.Mutex
	quiet   chan struct{} // closed once nothing is in flight

	mu        sync.Mutex
	following int // Follows in force: one processor while quiet
	writers   int // lowered writers running
	writing   int // lowered writers writing a batch now
	timer     *time.Timer
	checks    int // for tests
}

// changes counts the processor count's changes made here, for the
// metrics: each one stops the world for a moment.
var changes atomic.Int64

// Changes reports how many times proxyd has changed its processor count.
func Changes() int64 { return changes.Load() }

// fixed: GOMAXPROCS is set in the environment; nothing here changes it.
var fixed = os.Getenv("GOMAXPROCS") != ""

// def is the runtime's choice, taken before anything here changed it.
var def = runtime.GOMAXPROCS(0)

// Follow has the processor count follow the calls (see the package
// comment) until stop is called. Without it the count is the runtime's
// choice plus the lowered writers'.
func Follow() (stop func()) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if fixed {
		return func() {}
	}
	st.following++
	st.on.Store(true)
	apply()
	var once sync.Once
	return func() {
		once.Do(unfollow)
	}
}

func unfollow() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.following--
	if st.following == 0 {
		st.on.Store(false)
		if st.timer != nil {
			st.timer.Stop()
			st.timer = nil
		}
		st.busy.Store(false)
	}
	apply()
}

// Enter counts a call in flight until Leave. A call that overlaps
// another raises the processor count before it goes on (once, until the
// calls are quiet again).
func Enter() {
	if st.inflight.Add(1) < 2 || !st.on.Load() {
		return
	}
	st.overlapped.Store(true)
	if !st.busy.Load() {
		raise()
	}
}

// Leave ends a call counted by Enter.
func Leave() {
	if st.inflight.Add(-1) == 0 {
		quietNow()
	}
}

// Serve counts a request to the MCP endpoint in flight until Served:
// from its arrival to the end of its answer, a longer span than its
// call's (Enter). WaitQuiet waits out both.
func Serve() { st.serving.Add(1) }

// Served ends a request counted by Serve.
func Served() {
	if st.serving.Add(-1) == 0 {
		quietNow()
	}
}

// Lone reports whether proxyd's Go code runs on one processor for calls
// that come one at a time (see the package comment) rather than on the
// runtime's choice.
func Lone() bool { return st.on.Load() && !st.busy.Load() }

// calling reports whether a request or a call is in flight.
func calling() bool { return st.inflight.Load() > 0 || st.serving.Load() > 0 }

// InFlight reports how many requests (Serve) and calls (Enter) are in
// flight, for tests.
func InFlight() (requests, calls int64) { return st.serving.Load(), st.inflight.Load() }

// WaitQuiet returns once no request or call is in flight, or after max.
// Work that would hold the one processor of lone calls (see Lone) runs
// in such moments, in pieces, so that a request finds it busy for one
// piece at most.
func WaitQuiet(max time.Duration) {
	var t *time.Timer
	for calling() {
		st.quietMu.Lock()
		if st.quiet == nil {
			st.quiet = make(chan struct{})
		}
		ch := st.quiet
		st.waiting.Store(true)
		st.quietMu.Unlock()
		if !calling() { // the last one ended before it could see the channel
			return
		}
		if t == nil {
			t = time.NewTimer(max)
			defer t.Stop()
		}
		select {
		case <-ch:
		case <-t.C:
			return
		}
	}
}

// quietNow wakes WaitQuiet's waiters when nothing is in flight. The
// request or call that ends last calls it just before its answer leaves;
// a woken waiter, on the one processor, runs once that goroutine waits
// (for the connection's next request), so the answer goes first.
func quietNow() {
	if !st.waiting.Load() || calling() {
		return
	}
	st.quietMu.Lock()
	defer st.quietMu.Unlock()
	if st.quiet != nil {
		close(st.quiet)
		st.quiet = nil
	}
	st.waiting.Store(false)
}

func raise() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.following == 0 || st.busy.Load() {
		return
	}
	st.busy.Store(true)
	apply()
	st.timer = time.AfterFunc(quietAfter, check)
}

// check goes back to one processor when no calls overlapped since the
// last check and fewer than two are in flight. A call that overlaps
// another just as the count drops may miss raising it; the next
// overlapping call raises it.
func check() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.following == 0 || st.timer == nil {
		return
	}
	st.checks++
	if st.overlapped.Swap(false) || st.inflight.Load() >= 2 {
		st.timer.Reset(quietAfter)
		return
	}
	st.timer = nil
	st.busy.Store(false)
	apply()
}

// Writer counts a lowered writer (a thread at a lower priority) until
// done. Its thread, off the CPU, would hold a processor the calls need,
// so it brings one of its own: for as long as it runs while calls
// overlap (or the count does not follow them), and while it writes a
// batch (see Batch) while they do not.
func Writer() (done func()) { return hold(&st.writers) }

// Batch marks a lowered writer's batch until done: with one processor
// for the calls, the writer takes one more for the batch rather than
// hold the calls' for its length.
func Batch() (done func()) { return hold(&st.writing) }

// hold counts one more in n (writers or writing) until done, and sets
// the processor count each way.
func hold(n *int) (done func()) {
	st.mu.Lock()
	defer st.mu.Unlock()
	*n++
	apply()
	return func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		*n--
		apply()
	}
}

// apply sets the processor count for the state (st.mu held). Each change
// stops the world briefly, so an unchanged count is left alone.
func apply() {
	if fixed {
		return
	}
	if Lone() {
		set(1 + st.writing)
		return
	}
	if st.writers == 0 {
		// The runtime's own choice, which follows the CPU limit.
		if runtime.GOMAXPROCS(0) != def {
			runtime.SetDefaultGOMAXPROCS()
			changes.Add(1)
		}
		return
	}
	set(def + st.writers)
}

func set(n int) {
	if runtime.GOMAXPROCS(0) != n {
		runtime.GOMAXPROCS(n)
		changes.Add(1)
	}
}
