package upstream

import (
	"context"
	"errors"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// Dial connects to a server that is not in the configuration (a one-shot
// target of the command line: a URL or a stdio command) with the
// manager's transport chain, and waits until the connection is ready or
// has failed its first attempt, or ctx ends. The connection is not listed
// by the manager and gets no retries worth waiting for: close it with the
// returned func when done.
func (m *Manager) Dial(ctx context.Context, s config.Server) (*Conn, func(), error) {
	changed := make(chan struct{}, 1)
	o := m.opts
	o.OnChange = func(name string) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	o.OnNotification = nil
	c := newConn(m.ctx, s, &o)
	closeFn := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.close(cctx)
	}
	for {
		switch c.State() {
		case api.StateReady:
			return c, closeFn, nil
		case api.StateError:
			msg := c.Status().LastError
			closeFn()
			return nil, nil, errors.New(msg)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			closeFn()
			return nil, nil, ctx.Err()
		}
	}
}
