package upstream

import (
	"context"
	"sync"

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// attempts counts the connection attempts of one Conn, so that a caller
// can wait for the first attempt that starts after its request: an
// attempt already running (say, without the token a sign-in just stored)
// does not count.
type attempts struct {
	mu       sync.Mutex
	started  uint64
	finished uint64
	settled  chan struct{} // closed and replaced when an attempt finishes
}

func (a *attempts) begin() {
	a.mu.Lock()
	a.started++
	a.mu.Unlock()
}

func (a *attempts) end() {
	a.mu.Lock()
	a.finished++
	if a.settled != nil {
		close(a.settled)
		a.settled = nil
	}
	a.mu.Unlock()
}

// wait returns once an attempt numbered above after has finished.
func (a *attempts) wait(ctx context.Context, after uint64) error {
	for {
		a.mu.Lock()
		if a.finished > after {
			a.mu.Unlock()
			return nil
		}
		if a.settled == nil {
			a.settled = make(chan struct{})
		}
		ch := a.settled
		a.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ReconnectWait reconnects and returns the server's status once the new
// connection attempt has finished: ready with its lists fetched, or
// failed with the reason in LastError. A disabled server returns at once.
func (c *Conn) ReconnectWait(ctx context.Context) (api.ServerStatus, error) {
	if c.Status().State == api.StateDisabled {
		return c.Status(), nil
	}
	c.tries.mu.Lock()
	after := c.tries.started
	c.tries.mu.Unlock()
	c.Reconnect()
	err := c.tries.wait(ctx, after)
	return c.Status(), err
}
