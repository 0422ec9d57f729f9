package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/mcpx-dev/mcpx/proxyd/callerr"
)

// attemptTrace is what the session layer of the HTTP chain saw for one
// attempt of a call (the last HTTP request it made).
type attemptTrace struct {
	mu        sync.Mutex
	sent      bool
	session   string // the session id the request carried
	status    int
	deviation bool
}

func (t *attemptTrace) snapshot() (sent bool, session string, status int, deviation bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sent, t.session, t.status, t.deviation
}

type traceKey struct{}

func withTrace(ctx context.Context) (context.Context, *attemptTrace) {
	t := &attemptTrace{}
	return context.WithValue(ctx, traceKey{}, t), t
}

// staleKey marks the re-initialisation's requests with the stale session
// id, which the session layer strips: mcp-go keeps an id the server
// answered 400 for, and such a server refuses an initialize that carries it.
type staleKey struct{}

// sessionTransport is the innermost layer of an HTTP upstream's chain:
// it traces each call attempt (sent, session id, status, the 400
// deviation), strips a stale id from a re-initialisation, and presents a
// forged id during the session drill.
type sessionTransport struct {
	next http.RoundTripper
	conn *Conn
}

func (t *sessionTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	stale, _ := ctx.Value(staleKey{}).(string)
	if stale == "" {
		// The barrier is enforced here, where the session id is fixed (a
		// large request takes a while to encode, so a check before the
		// library would leave a gap). The re-initialisation's own requests
		// carry staleKey.
		if err := t.conn.waitBarrier(ctx); err != nil {
			return nil, err
		}
	}
	id := req.Header.Get(sessionHeader)
	if stale != "" && id == stale {
		req = req.Clone(ctx)
		req.Header.Del(sessionHeader)
		id = ""
	} else if f := t.conn.forged.Load(); f != nil && id != "" && id == f.real {
		req = req.Clone(ctx)
		req.Header.Set(sessionHeader, f.fake)
	}
	tr, _ := ctx.Value(traceKey{}).(*attemptTrace)
	if tr == nil {
		return t.next.RoundTrip(req)
	}
	tr.mu.Lock()
	tr.sent, tr.session, tr.status, tr.deviation = true, id, 0, false
	tr.mu.Unlock()
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	deviation := false
	switch {
	case resp.Body == nil || id == "":
	case resp.StatusCode == http.StatusBadRequest:
		deviation = peekDeviation(resp)
	case resp.StatusCode == http.StatusNotFound:
		// mcp-go closes a 404 unread, which costs the connection; read
		// the (short) body first so a burst of lost-session replies does
		// not turn into a burst of new connections for the retries.
		_, _ = peekBody(resp)
	}
	tr.mu.Lock()
	tr.status, tr.deviation = resp.StatusCode, deviation
	tr.mu.Unlock()
	return resp, nil
}

// peekDeviation reports whether a 400 body is the "No valid session ID"
// JSON-RPC error, leaving the body unchanged for the reader.
func peekDeviation(resp *http.Response) bool {
	head, ok := peekBody(resp)
	if !ok {
		return false
	}
	var msg struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(bytes.TrimSpace(head), &msg) != nil || msg.Error == nil {
		return false
	}
	return strings.TrimSpace(msg.Error.Message) == deviationMessage
}

// peekBody reads up to deviationPeek bytes of the body and puts them back
// in front of the rest; ok means that was the whole body.
func peekBody(resp *http.Response) (head []byte, ok bool) {
	head, whole, _ := callerr.PeekBody(resp, deviationPeek)
	return head, whole
}
