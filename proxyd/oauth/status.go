package oauth

import (
	"context"
	"slices"
	"time"
)

// Status is what `mcpx auth status` shows for a server.
type Status struct {
	Key             string    `json:"key"`
	Server          string    `json:"server"`
	SignedIn        bool      `json:"signed_in"`
	Expiry          time.Time `json:"expiry,omitzero"`
	HasRefreshToken bool      `json:"refresh_token"`
	Scopes          []string  `json:"scopes,omitempty"`
	LastRefresh     time.Time `json:"last_refresh,omitzero"`
	LastOutcome     Outcome   `json:"last_outcome,omitempty"`
	LastClass       string    `json:"last_class,omitempty"` // transient|terminal
	LastError       string    `json:"last_error,omitempty"`
	Latched         string    `json:"latched,omitempty"` // terminal message: sign in again
	CooldownUntil   time.Time `json:"cooldown_until,omitzero"`
	NextProactive   time.Time `json:"next_proactive_refresh,omitzero"`
	Refreshing      bool      `json:"refreshing,omitempty"`
}

// Status reports key's sign-in and refresh state.
func (c *Coordinator) Status(key string) Status {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s := Status{Key: key}
	c.mu.Lock()
	st := c.keys[key]
	if st != nil {
		s.Server = st.src.Server
		s.Refreshing = st.flight != nil
		if st.cool != nil && c.opts.Now().Before(st.cool.until) {
			s.CooldownUntil = st.cool.until
		}
	}
	c.mu.Unlock()
	if t, err := c.store.Token(ctx, key); err == nil {
		s.SignedIn = true
		s.Expiry = t.Expiry
		s.HasRefreshToken = t.RefreshToken != ""
		s.Scopes = slices.Clone(t.Scopes)
		if !t.Expiry.IsZero() && s.HasRefreshToken {
			s.NextProactive = t.Expiry.Add(-c.margin(t))
		}
		if st != nil {
			fp := ""
			c.mu.Lock()
			var client *Client
			if st.src.Client != nil {
				client = st.src.Client
			}
			c.mu.Unlock()
			if client == nil {
				client, _ = c.store.Client(ctx, key)
			}
			fp = fingerprint(t.Generation, t.RefreshToken, clientIDOf(client))
			c.mu.Lock()
			if st.latch != nil && st.latch.fp == fp {
				s.Latched = st.latch.err.Msg
			}
			c.mu.Unlock()
		}
	}
	if rs, err := c.store.State(ctx, key); err == nil {
		s.LastRefresh, s.LastOutcome, s.LastClass = rs.LastRefresh, rs.LastOutcome, rs.LastClass
		if s.Latched == "" && s.SignedIn {
			s.Latched = rs.Latched
		}
	}
	c.mu.Lock()
	if st != nil && st.last.Err != nil {
		s.LastError = safeMessage(st.last.Err)
	}
	c.mu.Unlock()
	return s
}

// TokenRequests is the number of refresh requests sent to key's token
// endpoint since it was registered (the refresh drill reads it before and
// after).
func (c *Coordinator) TokenRequests(key string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.keys[key]; ok {
		return st.requests
	}
	return 0
}
