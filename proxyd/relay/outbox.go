package relay

import (
	"encoding/json"
	"sync"
)

// An Outbox passes notifications to one client in the order they came, on
// a goroutine of its own. The goroutines that read an upstream's shared
// channels (a stdio server's stdout, the standing GET stream) put their
// notifications here rather than write them to the client: a client slow
// to read its stream would otherwise hold up every other call to that
// server, since nothing more is read from the channel while one write
// waits.
//
// It holds at most OutboxMessages notifications, OutboxBytes of params
// (one of any size when it is empty). A client that lets more wait is not
// reading: what comes past the bound is dropped and counted.
type Outbox struct {
	deliver func(method string, params json.RawMessage)

	mu      sync.Mutex
	queue   []queued
	size    int
	writing bool          // a goroutine is delivering the queue
	done    chan struct{} // closed when it has delivered it all
	closed  bool
	dropped int
}

type queued struct {
	method string
	params json.RawMessage
}

// The bounds of one Outbox.
const (
	OutboxMessages = 1024
	OutboxBytes    = 4 << 20
)

// NewOutbox returns an Outbox that passes each notification to deliver.
func NewOutbox(deliver func(method string, params json.RawMessage)) *Outbox {
	return &Outbox{deliver: deliver}
}

// Put queues a notification; it never waits for the client. False once
// the Outbox is closed (the caller may route the notification elsewhere);
// a notification dropped for the bound counts as taken.
func (o *Outbox) Put(method string, params json.RawMessage) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	if len(o.queue) > 0 && (len(o.queue) >= OutboxMessages || o.size+len(params) > OutboxBytes) {
		o.dropped++
		return true
	}
	o.queue = append(o.queue, queued{method, params})
	o.size += len(params)
	if !o.writing {
		o.writing = true
		o.done = make(chan struct{})
		go o.drain(o.done)
	}
	return true
}

func (o *Outbox) drain(done chan struct{}) {
	defer close(done)
	for {
		o.mu.Lock()
		if len(o.queue) == 0 {
			o.queue, o.writing = nil, false
			o.mu.Unlock()
			return
		}
		q := o.queue[0]
		o.queue[0] = queued{}
		o.queue = o.queue[1:]
		o.size -= len(q.params)
		o.mu.Unlock()
		o.deliver(q.method, q.params)
	}
}

// Close takes no more notifications and returns once those taken are
// delivered, with the count dropped for the bound.
func (o *Outbox) Close() (dropped int) {
	o.mu.Lock()
	o.closed = true
	done := o.done
	if !o.writing {
		done = nil
	}
	dropped = o.dropped
	o.mu.Unlock()
	if done != nil {
		<-done
	}
	return dropped
}
