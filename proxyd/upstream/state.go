package upstream

import "github.com/mcpx-dev/mcpx/proxyd/api"

// stateClosing is the state of a connection being closed; it is never
// reported in the status (the connection is gone by then).
const stateClosing api.State = "closing"

// State is the server's current state, cheaper than Status on hot paths.
func (c *Conn) State() api.State {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.state
}
