package activity

import (
	"runtime"
	"syscall"
)

// writerNice is the writer thread's nice value. A batch of records costs
// the SQL engine tens of microseconds per record, taken from the same
// cores as the calls being relayed; at nice 10 the writer gets about a
// tenth of a normal thread's share of a contended core (weights 110 and
// 1024), so a call's thread goes first, and the writer still commits a
// full batch well within the flush interval at the ingest rates measured
// (tens of thousands of records a second). An idle core runs it at once.
const writerNice = 10

// lowerWriterPriority runs the calling goroutine on a thread of its own at
// writerNice. The goroutine keeps the thread locked until it exits, so
// the thread ends with it rather than serving other goroutines.
func lowerWriterPriority() {
	runtime.LockOSThread()
	// PRIO_PROCESS with a thread id is one thread on Linux. Raising one's
	// own nice value needs no privilege; should it fail, the writer runs
	// as before.
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), writerNice)
}
