package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// answers are the requests proxyd wrote itself to a server whose
// responses come on a channel proxyd reads (a stdio child's stdout, the
// sse transport's event stream), waiting for them by id.
type answers struct {
	mu      sync.Mutex
	pending map[string]*awaited // by relay.IDKey of the request's id
	done    chan struct{}       // closed once the channel has ended
	err     error               // why it ended, set before done closes
}

// awaited is a request waiting for its response.
type awaited struct {
	answer chan relay.Message // buffered: the reader never waits for it
	rec    *callerr.Recorder
}

func newAnswers() answers {
	return answers{pending: map[string]*awaited{}, done: make(chan struct{})}
}

// expect registers request id before it is written; an error once the
// channel has ended.
func (a *answers) expect(id string, rec *callerr.Recorder) (*awaited, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending == nil {
		return nil, a.err
	}
	call := &awaited{answer: make(chan relay.Message, 1), rec: rec}
	a.pending[id] = call
	return call, nil
}

func (a *answers) take(id string) *awaited {
	a.mu.Lock()
	defer a.mu.Unlock()
	call := a.pending[id]
	delete(a.pending, id)
	return call
}

// deliver hands a response to the request waiting for it; false when
// none is (the library's own requests, or one given up).
func (a *answers) deliver(m relay.Message) bool {
	if call := a.take(relay.IDKey(m.ID)); call != nil {
		call.answer <- m
		return true
	}
	return false
}

// end fails the requests waiting with err; those waiting for a limit
// have it recorded first, since they return once done closes and their
// classification reads it.
func (a *answers) end(err error) {
	a.mu.Lock()
	waiting := a.pending
	a.pending, a.err = nil, err
	a.mu.Unlock()
	var le *callerr.LimitError
	if errors.As(err, &le) {
		for _, call := range waiting {
			call.rec.RecordLimit(le)
		}
	}
	close(a.done)
}

// wait returns the response to call, registered under key; gaveUp is
// true when ctx ended first (the request is to be cancelled upstream).
func (a *answers) wait(ctx context.Context, key string, call *awaited) (m relay.Message, gaveUp bool, err error) {
	select {
	case m := <-call.answer:
		return m, false, nil
	case <-a.done:
		// A response read just before the end is still this call's.
		select {
		case m := <-call.answer:
			return m, false, nil
		default:
		}
		return relay.Message{}, false, transport.NewError(a.err)
	case <-ctx.Done():
		a.take(key)
		return relay.Message{}, true, transport.NewError(ctx.Err())
	}
}

// answered is the response's result, or its error with the JSON-RPC code
// recorded for the call's classification.
func answered(rec *callerr.Recorder, x *exchange, m relay.Message) (json.RawMessage, error) {
	if m.Error != nil {
		rec.RecordJSONRPCError(m.Error.Code)
	}
	return x.outcome(m)
}
