package oauth

import (
	"context"
	"fmt"
	"time"
)

// Sync makes grants the set of grants the coordinator serves, keyed by
// server key: new keys are added, the sources of known ones updated, and
// keys not in grants forgotten, so that a server removed, renamed or
// pointed elsewhere is no longer refreshed (its stored token stays; a
// refresh already in flight finishes).
func (c *Coordinator) Sync(grants map[string]GrantSource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key := range c.keys {
		if _, ok := grants[key]; !ok {
			delete(c.keys, key)
		}
	}
	for key, src := range grants {
		if st, ok := c.keys[key]; ok {
			st.src = src
			continue
		}
		c.keys[key] = &keyState{src: src}
	}
}

// Forget drops what the coordinator remembers of key's token, after a
// write to the store that did not go through the coordinator.
func (c *Coordinator) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.keys[key]; ok {
		st.cached = nil
	}
}

func (c *Coordinator) state(key string) (*keyState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.keys[key]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownServer, key)
	}
	return st, nil
}

// SaveLogin stores the token of a completed sign-in and clears every
// latch, cooldown and registration rejection of key; a refresh in flight
// is discarded when it completes.
func (c *Coordinator) SaveLogin(ctx context.Context, key, name string, t *Token) (int64, error) {
	gen, err := c.store.SaveLogin(ctx, key, name, t)
	if err != nil {
		return 0, err
	}
	saved, err := c.store.Token(ctx, key)
	if err != nil {
		return gen, err
	}
	c.mu.Lock()
	if st, ok := c.keys[key]; ok {
		st.cached = saved
		st.latch, st.cool, st.rejected = nil, nil, false
	}
	c.mu.Unlock()
	c.saveState(ctx, key, RefreshState{})
	return gen, nil
}

// Logout deletes key's token. Revocation at the server is the caller's.
func (c *Coordinator) Logout(ctx context.Context, key string) error {
	if err := c.store.DeleteToken(ctx, key); err != nil {
		return err
	}
	c.mu.Lock()
	if st, ok := c.keys[key]; ok {
		st.cached = nil
		st.latch, st.cool = nil, nil
		st.stepUp = nil // a new sign-in starts with a fresh step-up budget
	}
	c.mu.Unlock()
	c.saveState(ctx, key, RefreshState{})
	return nil
}

// ExpireAccessToken marks key's access token expired, keeping the refresh
// token (the refresh drill).
func (c *Coordinator) ExpireAccessToken(ctx context.Context, key string) error {
	st, err := c.state(key)
	if err != nil {
		return err
	}
	var saved *Token
	err = c.store.UpdateToken(ctx, key, st.src.Server, func(cur *Token) (*Token, error) {
		if cur == nil {
			return nil, &NotSignedInError{Server: st.src.Server}
		}
		next := *cur
		next.Expiry = c.opts.Now().Add(-time.Second)
		saved = &next
		return &next, nil
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	st.cached = saved
	c.mu.Unlock()
	return nil
}

// CachedGeneration is the generation of key's grant this coordinator last
// read or wrote, if it holds one: a grant change seen in the store that
// matches it was made here.
func (c *Coordinator) CachedGeneration(key string) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.keys[key]; ok && st.cached != nil {
		return st.cached.Generation, true
	}
	return 0, false
}
