package upstream

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// run connects, waits for the connection to break, and reconnects with
// capped exponential backoff that honours the upstream's Retry-After.
func (c *Conn) run() {
	defer close(c.done)
	backoff := minBackoff
	for {
		c.tries.begin()
		retryAfter, err := c.connect()
		if c.ctx.Err() != nil {
			c.tries.end()
			c.closeClient()
			return
		}
		delay := backoff
		if retryAfter > delay {
			delay = retryAfter
		}
		if delay > maxBackoff && retryAfter <= maxBackoff {
			delay = maxBackoff
		}
		c.settle(err, delay)
		// The attempt ends once its outcome is recorded: a sign-in waiting
		// on it (ReconnectWait) reads the state this attempt left.
		c.tries.end()
		c.opts.changed(c.name)
		if err == nil {
			backoff = minBackoff
			readyAt := time.Now()
			c.forgetEarlierLosses()
			select {
			case <-c.ctx.Done():
				c.closeClient()
				return
			case err := <-c.broken:
				c.opts.logger().Warn("upstream connection lost", "server", c.name, "err", err)
				c.closeClient()
				if !c.backOffAfterBreach(err, time.Since(readyAt)) {
					return
				}
				c.setState(api.StateConnecting, err.Error())
				c.opts.changed(c.name)
				continue
			case <-c.kick:
				c.closeClient()
				c.setState(api.StateConnecting, "")
				continue
			}
		}
		c.opts.logger().Warn("upstream connect failed", "server", c.name, "err", err, "retry_in", delay.String())
		t := time.NewTimer(delay)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-c.kick:
			t.Stop()
		}
		if backoff *= 2; backoff > maxBackoff {
			backoff = maxBackoff
		}
		c.setState(api.StateConnecting, c.lastError())
	}
}

// settle records how a connection attempt ended: ready, or failed with
// err and the next try after delay.
func (c *Conn) settle(err error, delay time.Duration) {
	c.mu.Lock()
	if err == nil {
		c.attempts = 0
		c.nextRetry = time.Time{}
		c.failingSince = time.Time{}
	} else {
		c.attempts++
		c.nextRetry = c.opts.now().Add(delay)
		if c.failingSince.IsZero() {
			c.failingSince = c.opts.now()
		}
	}
	c.mu.Unlock()
	if err == nil {
		return
	}
	var authErr *callerr.AuthError
	c.signIn.Store(errors.Is(err, transport.ErrAuthorizationRequired) || errors.Is(err, transport.ErrOAuthAuthorizationRequired) ||
		errors.As(err, &authErr))
	c.setState(api.StateError, err.Error())
}

// Reconnect drops the connection and connects again at once.
func (c *Conn) Reconnect() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *Conn) closeClient() {
	c.mu.Lock()
	cl := c.cl
	c.cl = nil
	c.sid = ""
	c.mu.Unlock()
	c.forged.Store(nil)
	if cl != nil {
		_ = cl.Close()
	}
}

// forgetEarlierLosses drops a loss reported before the connection just
// made was ready: it was an earlier connection's (two requests that
// failed together report it twice, and one in flight as the connection
// was lost reports it late), and taken for this one's it would drop a
// good connection at once.
func (c *Conn) forgetEarlierLosses() {
	select {
	case <-c.broken:
	default:
	}
}

// checkBroken tells the run loop when an error means the connection is
// gone (a dead stdio child, a refused port), so it reconnects.
func (c *Conn) checkBroken(err error) {
	if err == nil || !connectionLost(err, c.cfg.EffectiveTransport()) {
		return
	}
	select {
	case c.broken <- err:
	default:
	}
}

func connectionLost(err error, tr string) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	if tr == config.TransportStdio {
		return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.EPIPE) ||
			errors.Is(err, os.ErrClosed) || strings.Contains(err.Error(), "file already closed") ||
			strings.Contains(err.Error(), "transport closed")
	}
	return false
}

// close stops the connection and waits for in-flight calls (bounded by ctx).
func (c *Conn) close(ctx context.Context) {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	waited := make(chan struct{})
	go func() { c.inflight.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
	}
	c.cancel()
	select {
	case <-c.done:
	case <-ctx.Done():
	}
	c.closeClient()
	c.closeHTTP()
}
