package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/config"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// streamBounds are the bounds of this server's event streams.
func (c *Conn) streamBounds(conn uint64) streamBounds {
	return streamBounds{maxEvent: c.cfg.ResponseLimit(), idle: c.cfg.StreamIdle(),
		onBreach: func(err error) { c.streamBroke(conn, err) }, onIdle: c.streamSilent}
}

// streamBroke drops connection conn of a server whose standing stream
// broke a bound; run connects again after a backoff.
func (c *Conn) streamBroke(conn uint64, err error) {
	c.losses.report(conn, err)
}

// streamSilent: the standing stream was closed for silence. The MCP
// library opens a Streamable HTTP stream again by itself; the older SSE
// transport carries everything on that stream, so it connects again.
func (c *Conn) streamSilent() {
	c.opts.logger().Debug("upstream stream silent; closed to be opened again", "server", c.name)
	if c.cfg.EffectiveTransport() == config.TransportSSE {
		c.Reconnect()
	}
}

// breaches paces reconnects of a server that keeps breaking limits: each
// breach in a row doubles the wait; a connection that lasted maxBackoff
// clears the count.
type breaches struct {
	mu      sync.Mutex
	strikes int
}

func (b *breaches) delay(up time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if up >= maxBackoff {
		b.strikes = 0
	}
	d := minBackoff << min(b.strikes, 6)
	b.strikes++
	return min(d, maxBackoff)
}

// backOffAfterBreach holds a connection that was dropped for breaking a
// limit, or whose sse transport stream the server ended (a server that
// ends it at once would otherwise be connected to in a loop), in the
// error state for a growing delay before it connects again, so the
// status says why. It reports false when the connection is closing.
func (c *Conn) backOffAfterBreach(err error, up time.Duration) bool {
	var le *callerr.LimitError
	if !errors.As(err, &le) && !errors.Is(err, errSSEEnded) {
		return true
	}
	d := c.breaches.delay(up)
	c.mu.Lock()
	c.attempts++
	c.nextRetry = c.opts.now().Add(d)
	if c.failingSince.IsZero() {
		c.failingSince = c.opts.now()
	}
	c.mu.Unlock()
	c.setState(api.StateError, fmt.Sprintf("%v (connecting again in %s)", err, d))
	c.opts.changed(c.name)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.ctx.Done():
		return false
	case <-t.C:
	case <-c.kick:
	}
	return true
}

// limitCause puts the broken limit in front of a call's error: the MCP
// library reports a stream it could not finish as a bare "unexpected nil
// response".
func limitCause(ctx context.Context, err error) error {
	le := callerr.RecorderFrom(ctx).Facts().Limit
	if le == nil || errors.As(err, new(*callerr.LimitError)) {
		return err
	}
	return fmt.Errorf("%w (%v)", le, err)
}

// replyFor checks that a reply answers request id: a reply under another
// id, whatever it holds, is not this request's result. An error under a
// null id is (JSON-RPC: the server could not tell the request's id; on
// the request's own response it can only be this request's).
func replyFor(got json.RawMessage, id string, isError bool) error {
	if isError && relay.IDKey(got) == "" {
		return nil
	}
	if s, ok := relay.String(bytes.TrimSpace(got)); !ok || s != id {
		return fmt.Errorf("%w (sent id %q, got %s)", callerr.ErrWrongID, id, got)
	}
	return nil
}

// libraryReplyFor is replyFor for a reply the MCP library's transport
// decoded.
func libraryReplyFor(resp *transport.JSONRPCResponse, id string) error {
	if resp.Error != nil && resp.ID.IsNil() {
		return nil
	}
	if v, ok := resp.ID.Value().(string); !ok || v != id {
		return fmt.Errorf("%w (sent id %q, got %s)", callerr.ErrWrongID, id, resp.ID.String())
	}
	return nil
}
