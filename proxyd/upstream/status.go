package upstream

import "github.com/mcpx-dev/mcpx/proxyd/api"

// Status reports the server's state.
func (c *Conn) Status() api.ServerStatus {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s := api.ServerStatus{
		Name:            c.name,
		Transport:       c.cfg.EffectiveTransport(),
		Target:          c.target(),
		Protocol:        c.cfg.EffectiveProtocol(),
		Era:             c.era,
		ProtocolVersion: c.version,
		ServerName:      c.serverInfo.Name,
		ServerVersion:   c.serverInfo.Version,
		State:           c.state,
		LastError:       c.lastErr,
		Since:           c.since,
		Attempts:        c.attempts,
		Tools:           len(c.tools),
		Prompts:         len(c.prompts),
		Resources:       len(c.resources),
		Reinits:         c.reinits.Load(),
	}
	if !c.nextRetry.IsZero() && c.state == api.StateError {
		t := c.nextRetry
		s.NextRetry = &t
	}
	if c.cl != nil {
		if id := c.cl.GetSessionId(); id != "" {
			s.SessionID = prefix(id)
		}
	}
	return s
}

// Generation counts the server's changes of state. A reader that saw a
// state and then reads the generation knows a publish of the server taken
// at that generation or later reflects at least that state.
func (c *Conn) Generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.stateGen
}

func (c *Conn) target() string { return c.cfg.Target() }
