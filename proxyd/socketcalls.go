package proxyd

import (
	"context"
	"net/http"
	"sync"

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// socketCalls gates the MCP endpoint on the control socket (the stdio
// bridge's). The socket's server stays up through a shutdown, so that
// status answers until the end; without the gate its MCP requests would
// keep arriving at a proxyd whose upstreams are closing. Once a shutdown
// starts, new requests are refused before anything runs (503, code
// stopping: the bridge sends them to the proxyd that replaces this one),
// and the running ones are drained with the TCP endpoint's.
type socketCalls struct {
	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup
}

// wrap admits next's requests while the gate is open.
func (g *socketCalls) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.enter() {
			writeError(w, &apiError{http.StatusServiceUnavailable, api.CodeStopping,
				"proxyd is stopping; send the request again once it is back ('mcpx up')"})
			return
		}
		defer g.running.Done()
		next.ServeHTTP(w, r)
	})
}

func (g *socketCalls) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.running.Add(1)
	return true
}

// close refuses new requests from now on.
func (g *socketCalls) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// drain waits for the requests admitted before close (or for ctx).
func (g *socketCalls) drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() { g.running.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
