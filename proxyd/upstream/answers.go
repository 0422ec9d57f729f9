package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/client"
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
// classification reads it. Only the first end counts.
func (a *answers) end(err error) {
	a.mu.Lock()
	if a.pending == nil {
		a.mu.Unlock()
		return
	}
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

// await returns the result of x, whose request was registered under key
// and written: its response's result, or its error with the JSON-RPC
// code recorded for the call's classification. When ctx ends first the
// request is cancelled upstream.
func (c *Conn) await(ctx context.Context, cl *client.Client, hc *http.Client, w wire, a *answers, x *exchange, key string, call *awaited) (json.RawMessage, error) {
	var m relay.Message
	select {
	case m = <-call.answer:
	case <-a.done:
		// A response read just before the end is still this call's.
		select {
		case m = <-call.answer:
		default:
			return nil, transport.NewError(a.err)
		}
	case <-ctx.Done():
		a.take(key)
		c.cancelUpstream(cl, hc, w, x.id)
		return nil, transport.NewError(ctx.Err())
	}
	if m.Error != nil {
		call.rec.RecordJSONRPCError(m.Error.Code)
	}
	return x.outcome(m)
}
