package activity

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/internal/procs"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/proxyd/store"
)

// niceOf reads a thread's nice value from /proc; ok is false once the
// thread has ended.
func niceOf(t *testing.T, task string) (nice int, ok bool) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/task/" + task + "/stat")
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) { // ended, or ending
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command (in parentheses, which may hold
	// spaces): nice is the 19th field of the line, the 17th after ")".
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n, err := strconv.Atoi(fields[16])
	if err != nil {
		t.Fatalf("nice of task %s: %v", task, err)
	}
	return n, true
}

// The writer runs on a thread of its own at a lower priority, and that
// thread ends with the writer instead of going on to run other goroutines
// (calls, among them) at that priority; so it is never the main thread,
// which the runtime keeps. With sync durability it keeps its priority.
func TestWriterThreadYieldsAndEndsWithTheWriter(t *testing.T) {
	skipUnlessLowered(t)
	s := NewStore(openDB(t, store.EngineSQLite), Options{})
	waitfor.True(t, 10*time.Second, "the writer to lower its thread", func() bool { return s.writerThread.Load() != 0 })
	task := strconv.FormatInt(s.writerThread.Load(), 10)
	if n, ok := niceOf(t, task); !ok || n != writerNice {
		t.Errorf("writer's thread %s: nice %d (alive %v), want %d", task, n, ok, writerNice)
	}
	s.Add(Record{Server: "s", Tool: "t"})
	flush(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, 10*time.Second, "the writer's thread to end", func() bool {
		_, alive := niceOf(t, task)
		return !alive
	})

	// With sync durability every call waits for its commit: the writer
	// keeps its priority.
	s = NewStore(openDB(t, store.EngineSQLite), Options{Durability: DurabilitySync})
	s.Add(Record{Server: "s", Tool: "t"}) // returns once committed: the writer has started
	if tid := s.writerThread.Load(); tid != 0 {
		t.Errorf("sync durability: the writer lowered thread %d", tid)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// skipUnlessLowered skips where the writer keeps the process's priority:
// the tests run under nice at writerNice or above, or a sandbox refuses
// the call (asked by setting this thread's own value).
func skipUnlessLowered(t *testing.T) {
	t.Helper()
	runtime.LockOSThread()
	tid := syscall.Gettid()
	raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	if err == nil {
		err = syscall.Setpriority(syscall.PRIO_PROCESS, tid, 20-raw)
	}
	runtime.UnlockOSThread()
	if err != nil {
		t.Skipf("a thread cannot set its priority here (%v): the writer keeps it", err)
	}
	if base := 20 - raw; base >= writerNice {
		t.Skipf("the tests run at nice %d: the writer keeps the process's priority", base)
	}
}

// defaultProcs is the runtime's choice, before any test's writer ran.
var defaultProcs = runtime.GOMAXPROCS(0)

// A lowered writer adds a processor for as long as it runs, so that its
// thread, off the CPU, does not hold one the calls need; with sync
// durability (not lowered) nothing is added.
func TestLoweredWriterBringsItsProcessor(t *testing.T) {
	skipUnlessLowered(t)
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS is set in the environment: the writer leaves it")
	}
	// Writers of earlier tests may still be on their way out.
	base := defaultProcs
	waitfor.True(t, 10*time.Second, "no lowered writer to run", func() bool { return runtime.GOMAXPROCS(0) == base })

	s := NewStore(openDB(t, store.EngineSQLite), Options{})
	waitfor.True(t, 10*time.Second, "GOMAXPROCS to gain one for the writer", func() bool { return runtime.GOMAXPROCS(0) == base+1 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, 10*time.Second, "GOMAXPROCS to lose the writer's", func() bool { return runtime.GOMAXPROCS(0) == base })

	s = NewStore(openDB(t, store.EngineSQLite), Options{Durability: DurabilitySync})
	s.Add(Record{Server: "s", Tool: "t"}) // returns once committed: the writer has started
	if n := runtime.GOMAXPROCS(0); n != base {
		t.Errorf("sync durability: GOMAXPROCS %d, want %d (no processor for a writer not lowered)", n, base)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// loneStore starts a lowered writer while proxyd's processor count
// follows the calls (none in flight: one processor), and returns it once
// its first retention trim, at start, has taken a processor of its own
// and given it back (two changes).
func loneStore(t *testing.T) *Store {
	t.Helper()
	skipUnlessLowered(t)
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS is set in the environment: the count never follows calls")
	}
	// Writers of earlier tests may still be on their way out.
	waitfor.True(t, 10*time.Second, "no lowered writer to run", func() bool { return runtime.GOMAXPROCS(0) == defaultProcs })
	t.Cleanup(procs.Follow())
	if !procs.Lone() {
		t.Fatal("following calls, none in flight: not on one processor")
	}
	from := procs.Changes()
	s := newStore(t, store.EngineSQLite, Options{})
	waitfor.True(t, 10*time.Second, "the writer to lower its thread", func() bool { return s.writerThread.Load() != 0 })
	waitfor.True(t, 10*time.Second, "the writer's first trim", func() bool { return procs.Changes() == from+2 })
	return s
}

// While calls come one at a time on proxyd's one processor, a lowered
// writer's batch is written on that processor between requests rather
// than on one of its own: the processor count does not change (each
// change stops the world), and every record is committed, in statements
// of a slice each.
func TestBatchBetweenLoneCallsKeepsTheCount(t *testing.T) {
	s := loneStore(t)

	before := procs.Changes()
	const n = 3*sliceRows + 1
	for i := range n {
		s.Add(Record{Server: "s", Tool: fmt.Sprintf("t%d", i)})
	}
	flush(t, s)
	if got := procs.Changes(); got != before {
		t.Errorf("a batch between lone calls changed the processor count %d times", got-before)
	}
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("GOMAXPROCS %d after the batch, want 1", n)
	}
	recs, err := s.List(context.Background(), Filter{Limit: 2 * n})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Errorf("%d records committed, want %d", len(recs), n)
	}

	// A call in flight for longer than the batch may wait (quietMax in
	// all) does not hold it up: flush returns with the call still running.
	procs.Enter()
	defer procs.Leave()
	for i := range n {
		s.Add(Record{Server: "s", Tool: fmt.Sprintf("u%d", i)})
	}
	flush(t, s)
	if recs, err = s.List(context.Background(), Filter{Limit: 4 * n}); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2*n {
		t.Errorf("%d records committed with a call in flight, want %d", len(recs), 2*n)
	}
}

// switchesOf reads a thread's context switches (voluntary and not) and
// whether it is asleep, from /proc.
func switchesOf(t *testing.T, task string) (n int, asleep bool) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/task/" + task + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "State":
			asleep = strings.HasPrefix(v, "S")
		case "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches":
			c, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s of task %s: %v", k, task, err)
			}
			n += c
		}
	}
	return n, asleep
}

// While calls come one at a time, nothing of the writer runs on its
// lowered thread: the thread holds a processor whenever it runs, and the
// kernel keeps a niced thread off a contended core for milliseconds, with
// proxyd's one processor and every request that arrives meanwhile. So
// taking records and writing them between calls leaves that thread
// asleep; only work with a processor of its own (a trim) wakes it.
func TestLoneWritesLeaveTheLoweredThreadAsleep(t *testing.T) {
	s := loneStore(t)
	task := strconv.FormatInt(s.writerThread.Load(), 10)
	var before int
	waitfor.True(t, 10*time.Second, "the lowered thread to sleep after the trim", func() bool {
		n, asleep := switchesOf(t, task)
		settled := asleep && n == before
		before = n
		return settled
	})
	for round := range 3 {
		for i := range 2*sliceRows + 1 {
			s.Add(Record{Server: "s", Tool: fmt.Sprintf("t%d-%d", round, i)})
		}
		flush(t, s)
	}
	if after, _ := switchesOf(t, task); after != before {
		t.Errorf("the lowered thread ran %d times while records were taken and written between lone calls, want 0", after-before)
	}
}
