package waitfor

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestTrueReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	True(t, 10*time.Second, "three polls", func() bool { return n.Add(1) >= 3 })
	if got := n.Load(); got != 3 {
		t.Fatalf("polled %d times, want 3", got)
	}
}

// failRecorder stops at the first Fatalf the way testing.T does, so the
// timeout path can be observed.
type failRecorder struct {
	testing.TB
	msg string
}

func (f *failRecorder) Helper() {}
func (f *failRecorder) Fatalf(format string, args ...any) {
	f.msg = format
	panic(f)
}

func TestCondFailsAfterTheTimeout(t *testing.T) {
	f := &failRecorder{TB: t}
	func() {
		defer func() {
			if r := recover(); r != f {
				t.Fatalf("recovered %v, want the recorder's stop", r)
			}
		}()
		Cond(f, 20*time.Millisecond, "never", func() (bool, string) { return false, "nope" })
	}()
	if f.msg == "" {
		t.Fatal("no failure after the timeout")
	}
}
