package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/mcpx-dev/mcpx/internal/mediatype"
	"github.com/mcpx-dev/mcpx/internal/redact"

	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/relay"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// On Streamable HTTP, proxyd sends a relayed request itself and reads the
// answer, JSON or SSE, itself: everything on the answer's stream belongs
// to this call, so its notifications and requests go to the call's client
// without any guessing, and the reader holds one event at a time within
// the server's max_response_bytes.

// parseMessage reads a JSON-RPC message of the upstream (any message on
// a response stream); its id, params and result are sub-slices of b,
// which the caller must not reuse.
func parseMessage(b []byte) (relay.Message, error) {
	m, err := relay.ParseMessage(b)
	if err != nil {
		return m, fmt.Errorf("the upstream sent %w", err)
	}
	return m, nil
}

// sseResumes bounds how often one response stream is resumed (SEP-1699:
// a legacy server may end the stream before the response and have the
// client poll with Last-Event-ID).
const sseResumes = 100

// post sends x as an HTTP POST and reads its answer; params are the
// parts the request's params join to (see envelope).
func (c *Conn) post(ctx context.Context, cl *client.Client, w wire, hc *http.Client, x *exchange, params [][]byte, meta json.RawMessage, header http.Header) (json.RawMessage, error) {
	sid := ""
	if !w.modern() {
		sid = cl.GetSessionId()
		if sid == "" && c.SessionID() != "" {
			// The library saw the session end and waits for a new one.
			return nil, fmt.Errorf("failed to send request: %w", transport.ErrSessionTerminated)
		}
	}
	// The request may outlive the call by the read of its SSE answer's
	// end (drainStream); until the call has its answer, the call's end
	// cancels it, with the call's cause, so a timeout reads as one (the
	// transport reports the cause). The call's deadline timer is the one
	// timer: the request has none of its own.
	rctx, rcancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopCancel := context.AfterFunc(ctx, func() { rcancel(context.Cause(ctx)) })
	// Unless an SSE answer's end is left to drainStream, the request ends
	// with post.
	var resp *http.Response
	draining := false
	defer func() {
		if draining {
			return
		}
		if resp != nil {
			resp.Body.Close()
		}
		stopCancel()
		rcancel(nil)
	}()
	// One buffer, which net/http knows is in memory: it sends the headers
	// and a small body in one write. A body it does not know (an
	// io.MultiReader of the parts) has its headers flushed on their own
	// and each part written apart: four writes for a small call
	// (TestRelayedCallIsOneWrite counts them).
	body := bytes.Join(envelope(x.id, x.ex.Method, params, meta), nil)
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, c.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building the request: %w", err)
	}
	if header != nil {
		req.Header = header
	} else {
		// Every era's POST names its method (see standardHeaders): set
		// here, where the method is known, rather than found in the body.
		req.Header[headerMethod] = []string{x.ex.Method}
	}
	c.setHeaders(req.Header, w, sid)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err = hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			c.cancelUpstream(cl, hc, w, x.id)
			// The deadline or the caller ended the wait: the request may
			// well have gone out, and "failed to send" would mislead.
			return nil, fmt.Errorf("no answer from the upstream before the call ended: %w", err)
		}
		return nil, fmt.Errorf("failed to send request: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, c.statusError(resp, w, sid)
	}
	switch mediatype.Of(resp.Header.Get("Content-Type")) {
	case "application/json":
		b, err := callerr.ReadBody(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("reading the response: %w", err)
		}
		m, err := parseMessage(b)
		if err != nil {
			return nil, fmt.Errorf("failed to decode response: %w", err)
		}
		if err := replyFor(m.ID, x.id, m.Error != nil); err != nil {
			return nil, err
		}
		return x.outcome(m)
	case "text/event-stream":
		resp.Body = callerr.StreamBody(resp.Body)
		res, rest, err := c.readStream(ctx, cl, w, hc, x, resp.Body, sid)
		if err != nil && ctx.Err() != nil {
			c.cancelUpstream(cl, hc, w, x.id)
		}
		if rest && stopCancel() {
			draining = true
			body := resp.Body
			relay.AfterAnswer(ctx, func() { drainStream(body, rcancel) })
		}
		return res, err
	default:
		return nil, fmt.Errorf("unexpected content type: %s", resp.Header.Get("Content-Type"))
	}
}

// envelope is the JSON-RPC request (id, method, params with "_meta":
// meta added when meta is set) as the parts of its body. params are the
// parts the params join to (none, or only empty ones: no params): the
// params, edited or not, are copied once, as the parts are joined.
func envelope(id, method string, params [][]byte, meta json.RawMessage) [][]byte {
	head := make([]byte, 0, 48+len(id)+len(method))
	head = append(head, `{"jsonrpc":"2.0","id":"`...)
	head = append(head, id...)
	head = append(head, `","method":`...)
	head = relay.AppendString(head, method)
	switch {
	case meta != nil:
		head = append(head, `,"params":`...)
		open, tail := metaParts(params, meta)
		return slices.Concat([][]byte{head}, open, [][]byte{append(tail, '}')})
	case size(params) > 0:
		head = append(head, `,"params":`...)
		return slices.Concat([][]byte{head}, params, [][]byte{[]byte("}")})
	}
	return [][]byte{append(head, '}')}
}

// outcome is a response message's result or error.
func (x *exchange) outcome(m relay.Message) (json.RawMessage, error) {
	if m.Error != nil {
		return nil, m.Error
	}
	if m.Result == nil {
		return nil, fmt.Errorf("the upstream's response has neither result nor error")
	}
	// The parse listed the result's members: the relay and the record
	// read its resultType and isError from the list.
	ms := m.Members
	x.ex.Result = &ms
	return m.Result, nil
}

// setHeaders adds the transport's headers: protocol version, session,
// and the server's configured headers.
func (c *Conn) setHeaders(h http.Header, w wire, sid string) {
	if w.version != "" {
		h.Set("Mcp-Protocol-Version", w.version)
	}
	if sid != "" {
		h.Set(sessionHeader, sid)
	}
	for k, v := range c.headers() {
		h.Set(k, v)
	}
}

// headers are the server's configured headers as resolved at connect.
func (c *Conn) headers() map[string]string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.hdrs
}

// statusError turns a non-200 answer into the error the library would
// give (the call recorder has noted the status for the classifier).
func (c *Conn) statusError(resp *http.Response, w wire, sid string) error {
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return &transport.AuthorizationRequiredError{}
	case resp.StatusCode == http.StatusNotFound && sid != "":
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, deviationPeek))
		return fmt.Errorf("failed to send request: %w", transport.ErrSessionTerminated)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if m, err := relay.ParseMessage(b); err == nil && m.Error != nil {
		return m.Error
	}
	if resp.StatusCode == http.StatusNotFound {
		// Without a session a 404 is a wrong endpoint (or, in the modern
		// era, a method the server does not have).
		return fmt.Errorf("failed to send request: %w", transport.ErrSessionTerminated)
	}
	return fmt.Errorf("request failed with status %d: %s", resp.StatusCode, bytes.TrimSpace(b))
}

// readStream reads an SSE answer until the response to x arrives,
// passing notifications to the call's client and answering the
// upstream's requests through it. rest: the response came on body (not
// on a resumed stream), whose end is left unread.
func (c *Conn) readStream(ctx context.Context, cl *client.Client, w wire, hc *http.Client, x *exchange, body io.ReadCloser, sid string) (res json.RawMessage, rest bool, err error) {
	max := c.cfg.ResponseLimit()
	lastID, retry := "", time.Duration(0)
	// A notification read from the stream is held by the client side, to
	// leave with what follows in one write when that is in hand already
	// (the result, mostly): held ones are flushed before the reader would
	// wait for the upstream, and on the way out but for x's own when its
	// result follows.
	var held []*exchange
	flush := func() {
		for _, h := range held {
			h.flush()
		}
		held = held[:0]
	}
	defer func() { flush() }()
	// One reader for the answer, moved to each resumed stream.
	r := newSSEReader(body, max)
	defer r.release()
	r.idle = flush
	for resumes := 0; ; resumes++ {
		for {
			ev, err := r.next()
			if ev.hasID {
				lastID = ev.id
			}
			if ev.hasRetry {
				retry = ev.retry
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, false, fmt.Errorf("reading the response stream: %w", err)
			}
			if len(ev.data) == 0 {
				continue
			}
			m, err := parseMessage(bytes.Clone(ev.data))
			if err != nil {
				continue // not a JSON-RPC message: skipped, as the library does
			}
			switch {
			case m.Method != "" && len(m.ID) > 0:
				c.serveRequest(m, x, func(b []byte) { c.postMessage(cl, hc, w, sid, b) })
			case m.Method != "":
				if h := c.deliverHeld(x, m.Method, m.Params); h != nil && !slices.Contains(held, h) {
					held = append(held, h)
				}
			case len(m.ID) > 0:
				if err := replyFor(m.ID, x.id, m.Error != nil); err != nil {
					return nil, false, err
				}
				if m.Error != nil {
					// The transport left the stream to this reader.
					callerr.RecorderFrom(ctx).RecordJSONRPCError(m.Error.Code)
				}
				held = slices.DeleteFunc(held, func(h *exchange) bool { return h == x })
				res, err := x.outcome(m)
				return res, resumes == 0, err
			}
		}
		flush()
		// The stream ended without the response. A legacy server may do so
		// on purpose once it has sent an event id, for the client to poll.
		if lastID == "" || w.modern() || resumes >= sseResumes || ctx.Err() != nil {
			return nil, false, fmt.Errorf("%w", errStreamEnded)
		}
		if retry <= 0 {
			retry = time.Second
		}
		t := time.NewTimer(max64(retry, 10*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, false, ctx.Err()
		case <-t.C:
		}
		next, err := c.resume(ctx, hc, w, sid, lastID)
		if err != nil {
			return nil, false, err
		}
		body.Close()
		body = next
		r.r.Reset(body)
	}
}

// drainWait and drainMax bound the read of what follows an SSE answer's
// response: a server ends the stream right after it.
const (
	drainWait = time.Second
	drainMax  = 64 << 10
)

// drainStream reads an SSE answer's end after its response, then lets it
// go; it runs once the client has its answer (relay.AfterAnswer). A
// response body closed unread makes the HTTP client drop its connection,
// and the next request would dial a new one. cancel ends the request
// (after drainWait at the latest).
func drainStream(body io.ReadCloser, cancel context.CancelCauseFunc) {
	t := time.AfterFunc(drainWait, func() { cancel(nil) })
	_, _ = io.Copy(io.Discard, io.LimitReader(body, drainMax))
	t.Stop()
	body.Close()
	cancel(nil)
}

func max64(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

// resume reopens a response stream with a GET carrying Last-Event-ID.
func (c *Conn) resume(ctx context.Context, hc *http.Client, w wire, sid, lastID string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(context.WithValue(ctx, callStreamKey{}, true), http.MethodGet, c.cfg.URL, nil)
	if err != nil {
		return nil, err
	}
	c.setHeaders(req.Header, w, sid)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", lastID)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("resuming the response stream: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, fmt.Errorf("resuming the response stream: %w", c.statusError(resp, w, sid))
	}
	return callerr.StreamBody(resp.Body), nil
}

// postMessage posts a response or notification to the upstream on the
// connection's context (not the call's: the call's status facts describe
// the call's own request).
func (c *Conn) postMessage(cl *client.Client, hc *http.Client, w wire, sid string, msg []byte) {
	u, err := c.postURL(cl)
	if err != nil {
		c.opts.logger().Debug("posting to the upstream", "server", c.name, "err", err)
		return
	}
	c.postTo(hc, u, w, sid, msg)
}

// postTo posts msg to u (see postMessage).
func (c *Conn) postTo(hc *http.Client, u string, w wire, sid string, msg []byte) {
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(msg))
	if err != nil {
		return
	}
	c.setHeaders(req.Header, w, sid)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		c.opts.logger().Debug("posting to the upstream", "server", c.name, "err", err)
		return
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		c.opts.logger().Warn("the upstream refused a message proxyd sent it", "server", c.name, "status", resp.StatusCode,
			"answer", redact.Text(string(bytes.TrimSpace(b))))
	}
}

// cancelUpstream tells the upstream that proxyd gave up request id: in the
// modern era over HTTP, closing the response stream did that already;
// otherwise a notifications/cancelled goes out.
func (c *Conn) cancelUpstream(cl *client.Client, hc *http.Client, w wire, id string) {
	if w.modern() && hc != nil {
		return
	}
	params := cancelParams(id, "the client cancelled the request")
	if hc != nil {
		msg := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":` + string(params) + `}`)
		go c.postMessage(cl, hc, w, cl.GetSessionId(), msg)
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
		defer cancel()
		n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: string(mcp.MethodNotificationCancelled)}}
		_ = json.Unmarshal(params, &n.Params)
		_ = cl.GetTransport().SendNotification(ctx, n)
	}()
}
