package proxyd

import (
	"context"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/internal/waitfor"
)

// A reader waits for the calls answered before it asked, not for later
// ones, and a call's bookkeeping runs once however often it is invoked.
func TestAnsweredWaitsForEarlierCalls(t *testing.T) {
	var a answered
	ran := 0
	first := a.hold(func() { ran++ })

	waited := make(chan struct{})
	go func() {
		a.wait(context.Background())
		close(waited)
	}()
	// The reader has sealed the first call's generation once cur is reset.
	waitfor.Cond(t, 5*time.Second, "the reader to start waiting", func() (bool, string) {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.cur == nil, "generation not sealed"
	})
	later := a.hold(func() {}) // answered after the reader asked
	select {
	case <-waited:
		t.Fatal("the reader did not wait for the call answered before it")
	default:
	}
	first()
	first()
	select {
	case <-waited:
	case <-time.After(settleBound / 2):
		t.Fatal("the reader still waits after the earlier call was recorded (it waited for a later one)")
	}
	if ran != 1 {
		t.Fatalf("bookkeeping ran %d times, want 1", ran)
	}
	later()

	// Nothing pending: no wait.
	done := make(chan struct{})
	go func() { a.wait(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(settleBound / 2):
		t.Fatal("a reader waited with nothing pending")
	}
}

// A reader also waits for calls answered before an earlier reader, still
// being recorded, whatever has been answered and recorded since.
func TestAnsweredWaitsForEarlierReadersCalls(t *testing.T) {
	for _, laterRecorded := range []bool{true, false} {
		var a answered
		first := a.hold(func() {})
		go a.wait(context.Background()) // the first reader seals first's generation
		waitfor.Cond(t, 5*time.Second, "the first reader to start waiting", func() (bool, string) {
			a.mu.Lock()
			defer a.mu.Unlock()
			return a.cur == nil && a.last != nil, "generation not sealed"
		})
		later := a.hold(func() {})
		if laterRecorded {
			later()
		}
		waited := make(chan struct{})
		go func() {
			a.wait(context.Background())
			close(waited)
		}()
		if !laterRecorded {
			waitfor.Cond(t, 5*time.Second, "the second reader to start waiting", func() (bool, string) {
				a.mu.Lock()
				defer a.mu.Unlock()
				return a.cur == nil, "generation not sealed"
			})
			later()
		}
		select {
		case <-waited:
			t.Fatalf("laterRecorded=%v: the second reader did not wait for a call answered before the first reader", laterRecorded)
		case <-time.After(20 * time.Millisecond):
		}
		first()
		select {
		case <-waited:
		case <-time.After(settleBound / 2):
			t.Fatalf("laterRecorded=%v: the second reader still waits after every call was recorded", laterRecorded)
		}
	}
}
