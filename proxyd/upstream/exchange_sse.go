package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// sseTransport is the MCP library's transport for the old HTTP+SSE
// transport (`transport: sse`, 2024-11-05), with proxyd's end of its
// event stream.
type sseTransport struct {
	*transport.SSE
	link *sseLink
}

// sseLink is proxyd's end of an sse transport's event stream, read by
// proxyd before the library (a standingStream). The requests proxyd
// relays are posted by proxyd, as built, and their responses taken from
// the stream by id; the server's requests and notifications go to
// proxyd's handlers as they came. The library decodes notifications into
// maps (members re-encoded sorted, large numbers rounded) and takes a
// server's request for a response to one of its own, which it drops, so
// a server asking for sampling or elicitation waited in vain. The rest
// (the endpoint, the handshake's and the lists' responses) is the
// library's.
type sseLink struct {
	answers // the relayed requests; ended with the stream

	// tr and hc post proxyd's answers to the server's requests made
	// before the connection is ready (set once, before the stream opens).
	tr *transport.SSE
	hc *http.Client
}

// errSSEEnded ends the requests waiting when the stream ends. It keeps
// the MCP library's words for it, which the classification reads.
var errSSEEnded = errors.New("connection has been closed: the server ended its event stream")

// route takes a message of the stream: a response to a relayed request,
// a request of the server, or, once the connection is ready, a
// notification (see standingMessage). False leaves it to the library.
func (l *sseLink) route(c *Conn, m relay.Message) bool {
	switch {
	case m.Method == "":
		return l.deliver(m)
	case c.standingMessage(m):
		return true
	case len(m.ID) == 0:
		return false
	}
	l.answerEarly(c, m)
	return true
}

// answerEarly answers a request the server sent before the connection
// was ready (a server asking for roots once initialized, say): no call
// can be its, so it gets what proxyd answers outside any call. The
// library would take it for a response to a request of its own, and
// drop it or, ids alike, hand it to that request.
func (l *sseLink) answerEarly(c *Conn, m relay.Message) {
	ep := l.tr.GetEndpoint()
	if ep == nil {
		return // requests come only after the endpoint; nowhere to answer
	}
	c.serveRequest(m, nil, func(b []byte) { c.postTo(l.hc, ep.String(), wire{}, "", b) })
}

// sseEnded ends the calls waiting on link's stream, which its read
// ended with err: a bound the stream broke (an event past
// max_response_bytes, say) is theirs too, else the stream's end. The
// stream carries everything the server sends: when it ends under a live
// connection (the server restarted, say), the connection is lost and
// made again. When proxyd closes the connection itself, it has let go
// of it first.
func (c *Conn) sseEnded(link *sseLink, err error) {
	ended := errSSEEnded
	var le *callerr.LimitError
	if errors.As(err, &le) {
		ended = le
	}
	link.end(ended)
	c.mu.RLock()
	live, n := c.cl != nil && sseOf(c.cl) == link, c.connNo
	c.mu.RUnlock()
	if live {
		c.streamBroke(n, ended)
	}
}

// sseOf is the link of the sse transport the client speaks through, nil
// for another transport.
func sseOf(cl *client.Client) *sseLink {
	if t, ok := cl.GetTransport().(sseTransport); ok {
		return t.link
	}
	return nil
}

// postURL is where messages to the server are posted: the endpoint an
// sse transport's server named, else the server's URL.
func (c *Conn) postURL(cl *client.Client) (string, error) {
	if t, ok := cl.GetTransport().(sseTransport); ok {
		ep := t.GetEndpoint()
		if ep == nil {
			return "", errors.New("endpoint not received")
		}
		return ep.String(), nil
	}
	return c.cfg.URL, nil
}

// sendSSE posts x to the endpoint the server named and waits for its
// response on the event stream: the params (parts, edited or not) are
// copied once, into the body, and the result comes as the server wrote
// it.
func (c *Conn) sendSSE(ctx context.Context, cl *client.Client, l *sseLink, hc *http.Client, w wire, x *exchange, params [][]byte, meta json.RawMessage, header http.Header) (json.RawMessage, error) {
	u, err := c.postURL(cl)
	if err != nil {
		return nil, transport.NewError(err)
	}
	key := relay.IDKey(relay.AppendString(nil, x.id))
	call, err := l.expect(key, callerr.RecorderFrom(ctx))
	if err != nil {
		return nil, transport.NewError(err)
	}
	body := bytes.Join(envelope(x.id, x.ex.Method, params, meta), nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		l.take(key)
		return nil, fmt.Errorf("building the request: %w", err)
	}
	if header != nil {
		req.Header = header
	}
	c.setHeaders(req.Header, w, "")
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		l.take(key)
		if ctx.Err() != nil {
			c.cancelUpstream(cl, hc, w, x.id)
		}
		return nil, transport.NewError(fmt.Errorf("failed to send request: %w", err))
	}
	// The answer comes on the stream; what the POST's body says (the
	// library reads it whole) is read within a bound, for a refusal.
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		l.take(key)
		if resp.StatusCode == http.StatusUnauthorized {
			return nil, transport.NewError(&transport.AuthorizationRequiredError{})
		}
		return nil, transport.NewError(fmt.Errorf("request failed with status %d: %s", resp.StatusCode, bytes.TrimSpace(b)))
	}
	return c.await(ctx, cl, hc, w, &l.answers, x, key, call)
}
