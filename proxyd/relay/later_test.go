package relay

import (
	"context"
	"testing"
	"time"
)

func TestLater(t *testing.T) {
	var l Later
	ctx := WithLater(context.Background(), &l)
	var order []int
	AfterAnswer(ctx, func() { order = append(order, 1) })
	AfterAnswer(ctx, func() { order = append(order, 2) })
	if len(order) != 0 {
		t.Fatalf("work ran before Close: %v", order)
	}
	work := l.Close()
	if len(work) != 2 {
		t.Fatalf("Close returned %d funcs, want 2", len(work))
	}
	for _, f := range work {
		f()
	}
	if len(order) != 2 || order[0] != 1 || order[1] != 2 {
		t.Fatalf("work ran as %v, want [1 2]", order)
	}
	if len(l.Close()) != 0 {
		t.Error("a second Close returned work")
	}

	// Once closed, and without a Later, work runs at once on its own.
	for name, ctx := range map[string]context.Context{"closed": ctx, "none": context.Background()} {
		ran := make(chan struct{})
		AfterAnswer(ctx, func() { close(ran) })
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the work did not run", name)
		}
	}
	var empty Later
	if len(empty.Close()) != 0 {
		t.Error("an empty Later returned work")
	}
}
