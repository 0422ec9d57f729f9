package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writers and a reader at once (run under -race): every write is kept
// whole.
func TestBufferConcurrent(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte("line\n"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := strings.Count(b.String(), "line\n"); got != 400 {
		t.Fatalf("%d lines, want 400", got)
	}
}
