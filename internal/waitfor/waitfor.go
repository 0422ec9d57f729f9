// Package waitfor is how tests wait for something to become true that
// nothing signals: a condition polled on a ticker until it holds or a
// deadline passes, never a fixed sleep.
package waitfor

import (
	"testing"
	"time"
)

// Interval is how often a condition is polled.
const Interval = 5 * time.Millisecond

// Cond polls cond until it reports ok, and fails t after timeout. what
// names the awaited state and last, from the final poll, what was seen
// instead.
func Cond(t testing.TB, timeout time.Duration, what string, cond func() (ok bool, last string)) {
	t.Helper()
	if ok, _ := cond(); ok {
		return
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-deadline.C:
			if ok, last := cond(); !ok {
				if last != "" {
					t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, last)
				}
				t.Fatalf("timed out after %s waiting for %s", timeout, what)
			}
			return
		}
		if ok, _ := cond(); ok {
			return
		}
	}
}

// True is Cond for a condition with nothing to report.
func True(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Cond(t, timeout, what, func() (bool, string) { return cond(), "" })
}
