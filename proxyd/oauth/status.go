package oauth

import (
	"context"
	"slices"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// Status reports key's sign-in and refresh state, as `mcpx auth status`
// shows it; Server is the registered server's name ("" for a key not
// registered) and URL is left to the caller.
func (c *Coordinator) Status(key string) api.AuthStatus {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s := api.AuthStatus{Scopes: []string{}, Grant: "authorization_code"}
	c.mu.Lock()
	st := c.keys[key]
	machine := false
	if st != nil {
		s.Server = st.src.Server
		if m := st.src.Machine; m != nil {
			s.Grant, s.IdentitySource, machine = m.Kind, m.IdentitySource(), true
		}
		s.Refreshing = st.flight != nil
		s.TokenRequests = st.requests
		if st.cool != nil && c.opts.Now().Before(st.cool.until) {
			s.CooldownUntil = timePtr(st.cool.until)
		}
	}
	c.mu.Unlock()
	if t, err := c.store.Token(ctx, key); err == nil {
		s.SignedIn = true
		s.Expiry = timePtr(t.Expiry)
		s.RefreshToken = t.RefreshToken != ""
		s.Binding, s.Issuer = t.Binding(), t.Issuer
		if !machine && t.Static() {
			s.Grant = "static" // set with 'mcpx auth set-token'
		}
		if len(t.Scopes) > 0 {
			s.Scopes = slices.Clone(t.Scopes)
		}
		if !t.Expiry.IsZero() && (s.RefreshToken || machine) {
			s.NextProactive = timePtr(t.Expiry.Add(-c.margin(t)))
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
		s.LastRefresh, s.LastOutcome, s.LastClass = timePtr(rs.LastRefresh), string(rs.LastOutcome), rs.LastClass
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

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
