package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/mcpx-dev/mcpx/internal/redact"
)

type latch struct {
	fp  string
	err *RefreshError
}

type cooldown struct {
	fp    string
	until time.Time
	count int
	err   *RefreshError
}

func fingerprint(gen int64, refreshToken, clientID string) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d\x00%s\x00%s", gen, refreshToken, clientID)))
	return hex.EncodeToString(sum[:8])
}

// invalidClient applies the registration rules to an invalid_client.
func (c *Coordinator) invalidClient(ctx context.Context, key string, st *keyState, src GrantSource, client *Client, cur *Token, e *RefreshError) {
	e.Terminal = true
	if !client.Registered || src.Client != nil {
		e.Msg = fmt.Sprintf("the authorization server rejected the configured client of %s (invalid_client): check oauth.client_id and oauth.client_secret in its config", src.Server)
		return
	}
	c.mu.Lock()
	again := st.rejected
	st.rejected = true
	c.mu.Unlock()
	if again {
		e.Msg = fmt.Sprintf("the authorization server of %s rejects new client registrations (invalid_client again before any success): configure oauth.client_id", src.Server)
		return
	}
	if _, err := c.store.ClearClientIf(ctx, key, client.ClientID, cur.RefreshToken); err != nil {
		c.log.Warn("oauth: clear rejected client registration", "server", src.Server, "error", redact.Text(err.Error()))
	}
	e.Msg = fmt.Sprintf("the authorization server no longer accepts the client registration of %s (invalid_client); it was cleared: sign in again (mcpx login %s)", src.Server, src.Server)
}

// fail latches a terminal error or starts a cooldown for a transient one.
func (c *Coordinator) fail(ctx context.Context, key string, st *keyState, fp string, e *RefreshError) {
	now := c.opts.Now()
	c.mu.Lock()
	if !e.Terminal {
		n := 1
		if st.cool != nil && st.cool.fp == fp {
			n = st.cool.count + 1
		}
		if e.Class == OutcomeOther && n >= c.opts.GiveUpAfter {
			e.Terminal = true
			e.Msg += fmt.Sprintf(" (gave up after %d attempts: sign in again)", n)
		} else {
			wait := min(2*time.Second<<min(n-1, 10), 2*time.Minute)
			wait = max(wait, e.RetryAfter)
			st.cool = &cooldown{fp: fp, until: now.Add(wait), count: n, err: e}
		}
	}
	if e.Terminal {
		st.latch = &latch{fp: fp, err: e}
		st.cool = nil
	}
	rs := RefreshState{LastRefresh: now, LastOutcome: e.Class, LastClass: "transient", Fingerprint: fp}
	if st.cool != nil {
		rs.CoolUntil, rs.CoolCount = st.cool.until, st.cool.count
	}
	c.mu.Unlock()
	if e.Terminal {
		rs.LastClass, rs.Latched = "terminal", e.Msg
	}
	c.saveState(ctx, key, rs)
}

func (c *Coordinator) saveState(ctx context.Context, key string, rs RefreshState) {
	if err := c.store.SaveState(ctx, key, rs); err != nil {
		c.log.Warn("oauth: save refresh state", "error", redact.Text(err.Error()))
	}
}

// ExchangeFailed applies the invalid_client registration rule to a failed
// authorization-code exchange and returns the classified error.
func (c *Coordinator) ExchangeFailed(ctx context.Context, key string, client *Client, err error) *RefreshError {
	e := ClassifyRefreshError(err, client != nil && client.Registered)
	e = &RefreshError{Class: e.Class, Terminal: e.Terminal, Code: e.Code, HTTPStatus: e.HTTPStatus, RetryAfter: e.RetryAfter,
		Msg: redact.Text(e.Msg, clientSecretOf(client)), Err: e.Err}
	if e.Class != OutcomeInvalidClient {
		return e
	}
	st, serr := c.state(key)
	if serr != nil {
		return e
	}
	c.mu.Lock()
	src := st.src
	c.mu.Unlock()
	cur, _ := c.store.Token(ctx, key)
	if cur == nil {
		cur = &Token{}
	}
	c.invalidClient(ctx, key, st, src, client, cur, e)
	return e
}

func clientSecretOf(c *Client) string {
	if c == nil {
		return ""
	}
	return c.ClientSecret
}

// held reports whether t's grant is latched or cooling down, so the
// refresher does not log a skipped flight at every tick.
func (c *Coordinator) held(ctx context.Context, key string, st *keyState, t *Token) bool {
	c.mu.Lock()
	client := st.src.Client
	c.mu.Unlock()
	if client == nil {
		client, _ = c.store.Client(ctx, key)
	}
	fp := fingerprint(t.Generation, t.RefreshToken, clientIDOf(client))
	c.mu.Lock()
	defer c.mu.Unlock()
	return (st.latch != nil && st.latch.fp == fp) ||
		(st.cool != nil && st.cool.fp == fp && c.opts.Now().Before(st.cool.until))
}
