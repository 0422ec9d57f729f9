package relay

import (
	"sync"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/internal/waitfor"
)

// Workers run every task, reuse the goroutines that went idle, keep at
// most maxIdleWorkers of them, and end the idle ones on close.
func TestWorkersReuseAndBound(t *testing.T) {
	w := newWorkers()
	// A burst larger than the idle bound: every task runs.
	const burst = maxIdleWorkers + 16
	var wg sync.WaitGroup
	release := make(chan struct{})
	wg.Add(burst)
	for range burst {
		w.run(func() { defer wg.Done(); <-release })
	}
	close(release)
	wg.Wait()
	waitfor.True(t, 10*time.Second, "the burst's workers to go idle, at most the bound", func() bool {
		return w.idle.Load() == maxIdleWorkers
	})

	// Sequential tasks go to idle workers: none is started.
	started := w.started.Load()
	for range 100 {
		// (a task handed over while its worker is still on the way back
		// to idle would start one)
		waitfor.True(t, 10*time.Second, "the workers to be idle", func() bool { return w.idle.Load() == maxIdleWorkers })
		done := make(chan struct{})
		w.run(func() { close(done) })
		<-done
	}
	waitfor.True(t, 10*time.Second, "the idle count to settle", func() bool {
		return w.idle.Load() == maxIdleWorkers
	})
	if n := w.started.Load() - started; n != 0 {
		t.Fatalf("sequential tasks started %d goroutines, want 0 (idle workers reused)", n)
	}

	w.close()
	waitfor.True(t, 10*time.Second, "idle workers to end on close", func() bool { return w.idle.Load() == 0 })
	// After close a task still runs.
	done := make(chan struct{})
	w.run(func() { close(done) })
	<-done
}
