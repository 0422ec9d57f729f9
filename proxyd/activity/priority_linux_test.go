package activity

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/proxyd/store"
)

// nicedThreads counts this process's threads running at writerNice.
func nicedThreads(t *testing.T) int {
	t.Helper()
	stats, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended meanwhile
		}
		// The fields after the command (in parentheses, which may hold
		// spaces): nice is the 19th field of the line, the 17th after ")".
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 16 && fields[16] == "10" {
			n++
		}
	}
	return n
}

// The writer runs on a thread of its own at a lower priority, and that
// thread ends with the writer instead of going on to run other goroutines
// (calls, among them) at that priority; with sync durability it does not.
func TestWriterThreadYieldsAndEndsWithTheWriter(t *testing.T) {
	if writerNice != 10 {
		t.Fatalf("nicedThreads looks for nice 10, the writer runs at %d", writerNice)
	}
	before := nicedThreads(t)
	s := NewStore(openDB(t, store.EngineSQLite), Options{})
	waitfor.True(t, 10*time.Second, "a thread at the writer's nice value", func() bool { return nicedThreads(t) == before+1 })
	s.Add(Record{Server: "s", Tool: "t"})
	flush(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, 10*time.Second, "the writer's thread to end", func() bool { return nicedThreads(t) == before })

	// With sync durability every call waits for its commit: the writer
	// keeps its priority.
	s = NewStore(openDB(t, store.EngineSQLite), Options{Durability: DurabilitySync})
	s.Add(Record{Server: "s", Tool: "t"}) // returns once committed: the writer has started
	if n := nicedThreads(t); n != before {
		t.Errorf("sync durability: %d threads at the writer's nice value, want %d", n, before)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
