package upstream

// State is the server's current state, cheaper than Status on hot paths.
func (c *Conn) State() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.state
}
