package activity

import (
	"runtime"
	"sync/atomic"
	"syscall"

	"github.com/mcpx-dev/mcpx/internal/procs"
)

// writerNice is the writer thread's nice value. A batch of records costs
// the SQL engine tens of microseconds per record, taken from the same
// cores as the calls being relayed; at nice 10 the writer gets about a
// tenth of a normal thread's share of a contended core (weights 110 and
// 1024), so a call's thread goes first, and the writer still commits a
// full batch well within the flush interval at the ingest rates measured
// (tens of thousands of records a second). An idle core runs it at once.
const writerNice = 10

// goLowered runs f on a goroutine of its own, locked to a thread of its
// own at writerNice, and stores that thread's id in thread (0 where it
// kept its priority). The goroutine never unlocks, so the thread ends
// with f rather than going on to serve other goroutines niced.
func goLowered(f func(), thread *atomic.Int64) {
	go func() {
		runtime.LockOSThread()
		if syscall.Gettid() == syscall.Getpid() {
			// The main thread never ends: the runtime parks it when its
			// goroutine exits locked, so the main thread, niced, would
			// outlive f. Start over on a new goroutine; while this one
			// holds the main thread, that one locks another.
			locked := make(chan struct{})
			go func() {
				runtime.LockOSThread()
				close(locked)
				runLowered(f, thread)
			}()
			<-locked
			runtime.UnlockOSThread()
			return
		}
		runLowered(f, thread)
	}()
}

// runLowered runs f on the calling (locked) thread at writerNice, with a
// processor of its own (see withOwnProc), where the thread could be
// lowered.
func runLowered(f func(), thread *atomic.Int64) {
	tid := lowerThisThread()
	thread.Store(int64(tid))
	if tid != 0 {
		f = withOwnProc(f)
	}
	f()
}

// withOwnProc wraps a lowered writer so that it brings its own processor
// (procs.Writer). Go code runs on one of GOMAXPROCS processors, and a
// goroutine holds its processor while its thread is off the CPU; the
// kernel keeps a niced thread off a contended core for milliseconds at a
// time, processor and all, and the calls then had one processor fewer
// (at 16 clients on two cores, proxyd's p99 stood at 1.3x-2.3x a bare
// proxy's in blocks of calls, 0.9x-1.1x with the extra processor). A
// GOMAXPROCS set in the environment is left as it is.
func withOwnProc(f func()) func() {
	return func() {
		defer procs.Writer()()
		f()
	}
}

// lowerThisThread sets the calling (locked) thread to writerNice and
// returns its id, or 0 where it keeps its priority.
func lowerThisThread() int {
	tid := syscall.Gettid()
	// PRIO_PROCESS with a thread id is one thread on Linux. Raising one's
	// own nice value needs no privilege. A process started under nice at
	// writerNice or above keeps the writer at its own value (never above
	// the calls', even where privilege would allow it); should a call
	// fail, the writer runs as before.
	raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	if err != nil || 20-raw >= writerNice { // the kernel returns 20 - nice
		return 0
	}
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, writerNice); err != nil {
		return 0
	}
	return tid
}
