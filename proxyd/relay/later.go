package relay

import (
	"context"
	"sync"
)

// Later holds work a relayed request leaves for after its client has the
// answer (the read of an upstream's SSE answer's end): the endpoint runs
// it on the goroutine it starts for the call's bookkeeping anyway, rather
// than the work taking a goroutine of its own while the answer is still
// on its way. Each goroutine started and ended per call is a wake-up of
// another thread on a busy machine.
type Later struct {
	mu     sync.Mutex
	closed bool
	work   []func()
}

type laterKey struct{}

// WithLater returns ctx carrying l for AfterAnswer.
func WithLater(ctx context.Context, l *Later) context.Context {
	return context.WithValue(ctx, laterKey{}, l)
}

// AfterAnswer runs f once the client of ctx's request has its answer,
// where ctx carries a Later still open; otherwise at once, on a goroutine
// of its own.
func AfterAnswer(ctx context.Context, f func()) {
	if l, _ := ctx.Value(laterKey{}).(*Later); l != nil && l.add(f) {
		return
	}
	go f()
}

func (l *Later) add(f func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.work = append(l.work, f)
	return true
}

// Close ends l: work left from now on runs at once. It returns the work
// left so far, in order.
func (l *Later) Close() []func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	work := l.work
	l.work = nil
	return work
}
