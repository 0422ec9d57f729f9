package procs

import (
	"runtime"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/internal/waitfor"
)

// The processor count through a daemon's life: the lowered writer's
// processor without Follow, one processor while calls do not overlap, the
// runtime's choice (and the writer's) from the first overlapping call
// until a quiet spell, one more while a writer writes a batch, and the
// runtime's choice again after stop.
func TestCountFollowsCalls(t *testing.T) {
	if fixed {
		t.Skip("GOMAXPROCS is set in the environment: nothing here changes it")
	}
	quietAfter = 50 * time.Millisecond
	want := func(step string, n int) {
		t.Helper()
		if got := runtime.GOMAXPROCS(0); got != n {
			t.Fatalf("%s: GOMAXPROCS %d, want %d", step, got, n)
		}
	}

	doneWriter := Writer()
	want("a writer, not following", def+1)
	doneWriter()
	want("no writer, not following", def)

	before := Changes()
	stop := Follow()
	want("following, no call", 1)
	if Changes() != before+1 {
		t.Errorf("Changes %d after one change from %d", Changes(), before)
	}
	Enter()
	want("one call", 1)
	Enter()
	want("two calls at once", def)
	Leave()
	Leave()
	waitfor.True(t, 10*time.Second, "one processor after a quiet spell", func() bool { return runtime.GOMAXPROCS(0) == 1 })

	doneWriter = Writer()
	want("a writer waiting, calls quiet", 1)
	doneBatch := Batch()
	want("a writer's batch, calls quiet", 2)
	Enter()
	Enter()
	want("a writer's batch, calls overlapping", def+1)
	doneBatch()
	want("a writer waiting, calls overlapping", def+1)
	Leave()
	Leave()
	waitfor.True(t, 10*time.Second, "one processor after a quiet spell", func() bool { return runtime.GOMAXPROCS(0) == 1 })

	// Calls overlapping across checks keep the count up.
	Enter()
	Enter()
	checks := func() int {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.checks
	}
	from := checks()
	waitfor.True(t, 10*time.Second, "two checks while two calls run", func() bool { return checks() >= from+2 })
	want("calls overlapping across checks", def+1)
	Leave()
	Leave()
	waitfor.True(t, 10*time.Second, "one processor after a quiet spell", func() bool { return runtime.GOMAXPROCS(0) == 1 })

	stop()
	stop() // twice is once
	want("stopped, a writer", def+1)
	doneWriter()
	want("stopped, no writer", def)
}

// WaitQuiet returns once neither a request (Serve) nor a call (Enter)
// is in flight, or after its bound.
func TestWaitQuiet(t *testing.T) {
	WaitQuiet(time.Hour) // nothing in flight: at once

	for _, tc := range []struct {
		name       string
		start, end func()
	}{
		{"request", Serve, Served},
		{"call", Enter, Leave},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.start()
			done := make(chan struct{})
			go func() { WaitQuiet(time.Hour); close(done) }()
			waitfor.True(t, 10*time.Second, "WaitQuiet to wait", st.waiting.Load)
			select {
			case <-done:
				t.Fatalf("WaitQuiet returned with a %s in flight", tc.name)
			default:
			}
			tc.end()
			<-done
		})
	}

	// A long call does not hold a waiter past its bound.
	Enter()
	defer Leave()
	WaitQuiet(time.Millisecond)
}
