package oauth

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcpx-dev/mcpx/internal/redact"
)

type flight struct {
	done chan struct{}
	tok  *Token
	err  error
}

// Refresh refreshes key's grant, sharing one flight among all concurrent
// callers. observed is the token the caller holds (nil: whatever is
// stored); when the stored token already differs from it, or is not due,
// no request is sent and the stored token is returned.
func (c *Coordinator) Refresh(ctx context.Context, key string, trigger Trigger, observed *Token) (*Token, error) {
	c.mu.Lock()
	st, ok := c.keys[key]
	if !ok {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrUnknownServer, key)
	}
	f := st.flight
	if f == nil && c.closed {
		c.mu.Unlock()
		return nil, errors.New("refresh refused: proxyd is shutting down")
	}
	if f == nil {
		f = &flight{done: make(chan struct{})}
		st.flight = f
		c.flights.Add(1)
		go func() {
			defer c.flights.Done()
			c.run(key, st, trigger, observed, f)
		}()
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.tok, f.err
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for token refresh: %w", ctx.Err())
	}
}

func (c *Coordinator) run(key string, st *keyState, trigger Trigger, observed *Token, f *flight) {
	start := c.opts.Now()
	// Detached from every caller: one caller giving up must not fail the
	// refresh for the others, nor abandon a rotated token mid-write.
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	c.mu.Lock()
	src := st.src
	c.mu.Unlock()

	info := FlightInfo{Key: key, Server: src.Server, Trigger: trigger, NetworkSkipped: true}
	tok, err := c.fly(ctx, key, st, src, trigger, observed, &info)
	info.Duration = c.opts.Now().Sub(start)
	info.Err = err

	// Report before releasing the waiters, so that what they observe
	// (metrics, hook) already includes this flight.
	c.report(info)

	c.mu.Lock()
	f.tok, f.err = tok, err
	st.flight = nil
	if info.Outcome != "" {
		st.last = info
	}
	c.mu.Unlock()
	close(f.done)
}

func (c *Coordinator) report(info FlightInfo) {
	if !info.NetworkSkipped && info.Outcome != "" && c.opts.Metrics != nil {
		c.opts.Metrics.WithLabelValues(string(info.Outcome)).Inc()
	}
	attrs := []any{"server", info.Server, "trigger", info.Trigger, "outcome", info.Outcome,
		"network_skipped", info.NetworkSkipped, "duration_ms", info.Duration.Milliseconds()}
	if info.Superseded {
		attrs = append(attrs, "superseded", true)
	}
	if info.Err != nil {
		attrs = append(attrs, "error", safeMessage(info.Err))
		c.log.Warn("oauth refresh", attrs...)
	} else {
		c.log.Info("oauth refresh", attrs...)
	}
	if c.opts.OnFlight != nil {
		c.opts.OnFlight(info)
	}
}

// safeMessage is the printable text of an error from this package.
func safeMessage(err error) string {
	var re *RefreshError
	if errors.As(err, &re) {
		return re.Msg
	}
	return redact.Text(err.Error())
}

func (c *Coordinator) fly(ctx context.Context, key string, st *keyState, src GrantSource, trigger Trigger, observed *Token, info *FlightInfo) (*Token, error) {
	// One refresh per grant across processes: hold the grant, then read
	// what the last holder stored.
	hold, err := c.opts.Lock.Hold(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("refresh %s: %w", src.Server, err)
	}
	defer hold.Release()
	cur, err := hold.Token(ctx)
	if errors.Is(err, ErrNoToken) {
		return nil, &NotSignedInError{Server: src.Server}
	}
	if err != nil {
		return nil, fmt.Errorf("refresh %s: %w", src.Server, err)
	}
	c.remember(st, cur)
	now := c.opts.Now()

	// Someone already rotated the token, or it is not due: no request.
	if observed != nil && observed.AccessToken != cur.AccessToken {
		info.Outcome = OutcomeSuccess
		return cur, nil
	}
	switch trigger {
	case TriggerUnauthorized:
		if now.Sub(cur.Obtained) < c.opts.MinRefreshInterval {
			info.Outcome = OutcomeSuccess
			return cur, nil
		}
	default:
		if !c.needsRefresh(cur, now) {
			info.Outcome = OutcomeSuccess
			return cur, nil
		}
	}

	client := src.Client
	if client == nil {
		client, err = c.store.Client(ctx, key)
		if err != nil && !errors.Is(err, ErrNoClient) {
			return nil, fmt.Errorf("refresh %s: %w", src.Server, err)
		}
	}
	fp := fingerprint(cur.Generation, cur.RefreshToken, clientIDOf(client))

	c.mu.Lock()
	if st.latch != nil && st.latch.fp == fp {
		e := st.latch.err
		c.mu.Unlock()
		info.Outcome = e.Class
		return nil, e
	}
	if st.cool != nil && st.cool.fp == fp && now.Before(st.cool.until) {
		e := st.cool.err
		c.mu.Unlock()
		info.Outcome = e.Class
		return nil, e
	}
	c.mu.Unlock()
	if e := c.shared(ctx, hold, key, st, src, fp, now); e != nil {
		info.Outcome = e.Class
		return nil, e
	}

	// A machine grant obtains its next token as it obtained the first;
	// its client may be anonymous (a workload identity alone).
	if src.Machine != nil && client == nil {
		client = &Client{}
	}
	// Never send an empty client_id, and never a refresh without a token.
	if src.Machine == nil && (client == nil || client.ClientID == "") {
		e := &RefreshError{Class: OutcomeInvalidClient, Terminal: true,
			Msg: fmt.Sprintf("no OAuth client registration for %s: sign in again (mcpx login %s)", src.Server, src.Server)}
		c.fail(ctx, key, st, fp, e)
		info.Outcome = e.Class
		return nil, e
	}
	if cur.RefreshToken == "" && src.Machine == nil {
		e := &RefreshError{Class: OutcomeInvalidGrant, Terminal: true,
			Msg: fmt.Sprintf("no refresh token was issued for %s: sign in again (mcpx login %s)", src.Server, src.Server)}
		c.fail(ctx, key, st, fp, e)
		info.Outcome = e.Class
		return nil, e
	}

	endpoint, err := src.TokenEndpoint(ctx)
	if err != nil {
		e := ClassifyRefreshError(err, client.Registered)
		e.Msg = "token endpoint unknown: " + redact.Text(err.Error())
		c.fail(ctx, key, st, fp, e)
		info.Outcome = e.Class
		return nil, e
	}

	info.NetworkSkipped = false
	c.mu.Lock()
	st.requests++
	c.mu.Unlock()
	// A refresh token is spent when its request arrives; a grant without
	// one (a machine grant) has nothing to lose and is not marked.
	rctx, marked := ctx, func() error { return nil }
	if cur.RefreshToken != "" {
		rctx, marked = markOnConnect(ctx, func() error { return hold.MarkInFlight(ctx, fp) })
	}
	ot, secrets, rerr := c.requestToken(rctx, src, client, endpoint, cur)
	if merr := marked(); merr != nil && rerr == nil {
		c.log.Warn("oauth: could not record the refresh in flight", "server", src.Server, "error", redact.Text(merr.Error()))
	}
	if rerr != nil {
		// The answer came back to this process: its outcome is known.
		if err := hold.ClearInFlight(ctx); err != nil {
			c.log.Warn("oauth: clear the refresh in flight", "server", src.Server, "error", redact.Text(err.Error()))
		}
		e := ClassifyRefreshError(rerr, client.Registered)
		e = &RefreshError{Class: e.Class, Terminal: e.Terminal, Code: e.Code, HTTPStatus: e.HTTPStatus,
			RetryAfter: e.RetryAfter, Msg: redact.Text(e.Msg, secrets...), Err: e.Err}
		info.Outcome = e.Class
		if latest, sup := c.supersededBy(ctx, key, cur); sup {
			info.Superseded = true
			c.remember(st, latest)
			return latest, nil
		}
		if e.Class == OutcomeInvalidClient {
			c.invalidClient(ctx, key, st, src, client, cur, e)
		}
		c.fail(ctx, key, st, fp, e)
		return nil, e
	}

	info.Outcome = OutcomeSuccess
	next := tokenFrom(ot, cur.Scopes, now)
	next.Generation, next.DPoPKey, next.Issuer = cur.Generation, cur.DPoPKey, cur.Issuer
	superseded, err := hold.Store(ctx, src.Server, cur, next, RefreshState{LastRefresh: now, LastOutcome: OutcomeSuccess})
	if err != nil {
		return nil, fmt.Errorf("store refreshed token for %s: %w", src.Server, err)
	}
	if superseded {
		info.Superseded = true
		latest, lerr := c.store.Token(ctx, key)
		if lerr != nil {
			return nil, &NotSignedInError{Server: src.Server}
		}
		c.remember(st, latest)
		return latest, nil
	}
	c.remember(st, next) // a sign-in that committed since keeps its newer token
	c.mu.Lock()
	st.latch, st.cool, st.rejected = nil, nil, false
	c.mu.Unlock()
	return next, nil
}

func clientIDOf(c *Client) string {
	if c == nil {
		return ""
	}
	return c.ClientID
}

// supersededBy reports whether a sign-in (or another process) replaced
// the grant cur while the request was out.
func (c *Coordinator) supersededBy(ctx context.Context, key string, cur *Token) (*Token, bool) {
	latest, err := c.store.Token(ctx, key)
	if err != nil {
		return nil, false
	}
	if !sameGrant(latest, cur) {
		return latest, true
	}
	return nil, false
}

// sameGrant reports whether latest is still the token cur: same sign-in
// and refresh token, and for a grant without refresh tokens (a machine
// grant) the same access token.
func sameGrant(latest, cur *Token) bool {
	return latest.Generation == cur.Generation && latest.RefreshToken == cur.RefreshToken &&
		(cur.RefreshToken != "" || latest.AccessToken == cur.AccessToken)
}
