package upstream

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
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
		conn := c.losses.begin()
		retryAfter, err := c.connect(conn)
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
			lost, stop := c.hold(conn)
			c.closeClient()
			switch {
			case stop:
				return
			case lost == nil: // asked to connect again
				c.setState(api.StateConnecting, "")
				continue
			}
			c.opts.logger().Warn("upstream connection lost", "server", c.name, "err", lost)
			if !c.backOffAfterBreach(lost, time.Since(readyAt)) {
				return
			}
			c.setState(api.StateConnecting, lost.Error())
			c.opts.changed(c.name)
			continue
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

// hold waits while connection conn lives: it returns the connection's
// loss, nil when asked to connect again, or stop when the server is
// closed.
func (c *Conn) hold(conn uint64) (lost error, stop bool) {
	for {
		select {
		case <-c.ctx.Done():
			return nil, true
		case <-c.kick:
			return nil, false
		case <-c.losses.wake:
			if err := c.losses.lost(conn); err != nil {
				return err, false
			}
		}
	}
}

// checkBroken tells the run loop when an error of connection conn means
// it is gone (a dead stdio child, a refused port), so it reconnects.
func (c *Conn) checkBroken(conn uint64, err error) {
	if err == nil || !connectionLost(err, c.cfg.EffectiveTransport()) {
		return
	}
	c.losses.report(conn, err)
}

// checkClient is checkBroken for an error of a request made on client cl;
// a client already replaced is not the current connection's.
func (c *Conn) checkClient(cl *client.Client, err error) {
	if err == nil {
		return
	}
	c.mu.RLock()
	live, conn := cl != nil && c.cl == cl, c.connNo
	c.mu.RUnlock()
	if live {
		c.checkBroken(conn, err)
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
