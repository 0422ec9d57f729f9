package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/oauth2"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/oauth/discovery"
)

// Triggers of a refresh.
const (
	TriggerReactive     = "reactive"     // a call found the token expired
	TriggerProactive    = "proactive"    // the refresher, before expiry
	TriggerUnauthorized = "unauthorized" // an upstream answered 401 to a token
	TriggerDrill        = "drill"        // mcpx drill refresh
)

// ErrAuthorizationRequired is matched (errors.Is) by every error that only
// a new sign-in can fix: not signed in, or a terminal refresh failure.
var ErrAuthorizationRequired = errors.New("authorization required")

// ErrUnknownServer is returned for a key that was never registered.
var ErrUnknownServer = errors.New("server not registered with the OAuth coordinator")

// Is makes a terminal RefreshError match ErrAuthorizationRequired.
func (e *RefreshError) Is(target error) bool {
	return target == ErrAuthorizationRequired && e.Terminal
}

// NotSignedInError says a server has no stored token.
type NotSignedInError struct{ Server string }

func (e *NotSignedInError) Error() string {
	return fmt.Sprintf("not signed in to %s: run mcpx login %s", e.Server, e.Server)
}
func (e *NotSignedInError) Is(target error) bool {
	return target == ErrAuthorizationRequired || target == ErrNoToken
}

// GrantSource is what a refresh of one server needs.
type GrantSource struct {
	Server string // display name, for logs and messages
	// TokenEndpoint returns the token endpoint, discovering it on first
	// use; it is called inside a flight only.
	TokenEndpoint func(ctx context.Context) (string, error)
	Resource      string  // RFC 8707 resource sent with every token request
	Client        *Client // configured client (oauth.client_id); nil: the stored registration
	HTTPClient    *http.Client
}

// FlightInfo describes one refresh flight, for the OnFlight hook.
type FlightInfo struct {
	Key, Server, Trigger string
	Outcome              string // Outcome* label; empty when nothing was attempted
	NetworkSkipped       bool   // no token request was sent
	Superseded           bool   // a sign-in replaced the grant meanwhile; result discarded
	Duration             time.Duration
	Err                  error
}

// CoordinatorOptions configure a Coordinator; zero values take defaults.
type CoordinatorOptions struct {
	Timeout time.Duration // of a flight; default 30s
	Now     func() time.Time
	Logger  *slog.Logger
	// Metrics counts token requests by outcome (label "outcome"); see
	// NewRefreshCounter.
	Metrics *prometheus.CounterVec
	// OnFlight is called once per flight before its waiters are released;
	// it must not block.
	OnFlight func(FlightInfo)
	// RefreshMargin: a token this close to expiry is refreshed (capped at
	// half its lifetime); default 60s.
	RefreshMargin time.Duration
	// MinRefreshInterval: a 401 on a token obtained more recently than
	// this does not refresh it again; default 5s.
	MinRefreshInterval time.Duration
	// GiveUpAfter consecutive unclassified failures latch; default 3.
	GiveUpAfter int
}

// NewRefreshCounter returns the refresh counter with every outcome
// initialised to zero; register it with the daemon's registry.
func NewRefreshCounter() *prometheus.CounterVec {
	cv := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpx_oauth_refresh_total",
		Help: "OAuth token refresh requests sent, by outcome.",
	}, []string{"outcome"})
	for _, o := range Outcomes {
		cv.WithLabelValues(o)
	}
	return cv
}

// Coordinator runs at most one refresh per server key. See the package
// documentation of DESIGN.md "One refresh per grant".
type Coordinator struct {
	store *Store
	opts  CoordinatorOptions
	log   *slog.Logger

	mu   sync.Mutex
	keys map[string]*keyState

	// flights tracks running refreshes so a shutdown can let them finish
	// storing their tokens: a refresh token is spent the moment the
	// request goes out, so dropping the answer would lose the grant.
	flights sync.WaitGroup
	closed  bool
}

// Close waits (bounded by ctx) for refreshes in flight to store their
// result; later refreshes are refused.
func (c *Coordinator) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.flights.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("refreshes still in flight at shutdown: %w", ctx.Err())
	}
}

type keyState struct {
	src    GrantSource
	flight *flight
	cached *Token // last token read or written through the coordinator
	latch  *latch
	cool   *cooldown
	// rejected is set when a registered client was cleared after
	// invalid_client, until the next successful token response.
	rejected bool
	last     FlightInfo
	requests int64 // token requests sent for this key
	stepUp   *stepUpState
}

type flight struct {
	done chan struct{}
	tok  *Token
	err  error
}

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

// NewCoordinator returns a coordinator over store.
func NewCoordinator(store *Store, opts CoordinatorOptions) *Coordinator {
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.RefreshMargin <= 0 {
		opts.RefreshMargin = 60 * time.Second
	}
	if opts.MinRefreshInterval <= 0 {
		opts.MinRefreshInterval = 5 * time.Second
	}
	if opts.GiveUpAfter <= 0 {
		opts.GiveUpAfter = 3
	}
	return &Coordinator{store: store, opts: opts, log: opts.Logger, keys: map[string]*keyState{}}
}

// Register adds or updates the grant source of key.
func (c *Coordinator) Register(key string, src GrantSource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.keys[key]; ok {
		st.src = src
		return
	}
	c.keys[key] = &keyState{src: src}
}

// Unregister forgets key (its stored token stays).
func (c *Coordinator) Unregister(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.keys, key)
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

// current returns key's token from memory or the store.
func (c *Coordinator) current(ctx context.Context, key string, st *keyState) (*Token, error) {
	c.mu.Lock()
	t := st.cached
	name := st.src.Server
	c.mu.Unlock()
	if t != nil {
		return t, nil
	}
	t, err := c.store.Token(ctx, key)
	if errors.Is(err, ErrNoToken) {
		return nil, &NotSignedInError{Server: name}
	}
	if err != nil {
		return nil, err
	}
	c.remember(st, t)
	return t, nil
}

// remember caches t unless a newer generation is already cached.
func (c *Coordinator) remember(st *keyState, t *Token) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.cached == nil || t.Generation >= st.cached.Generation {
		st.cached = t
	}
}

// Token returns a valid token for key, refreshing it (reactively) when it
// is expired or about to be. A failed refresh still yields the current
// token while it has not actually expired.
func (c *Coordinator) Token(ctx context.Context, key string) (*Token, error) {
	st, err := c.state(key)
	if err != nil {
		return nil, err
	}
	cur, err := c.current(ctx, key, st)
	if err != nil {
		return nil, err
	}
	now := c.opts.Now()
	if !c.needsRefresh(cur, now) {
		return cur, nil
	}
	t, err := c.Refresh(ctx, key, TriggerReactive, cur)
	if err != nil {
		if !cur.Expiry.IsZero() && now.Before(cur.Expiry) && !errors.Is(err, ErrNoToken) {
			return cur, nil
		}
		return nil, err
	}
	return t, nil
}

func (c *Coordinator) margin(t *Token) time.Duration {
	m := c.opts.RefreshMargin
	if !t.Obtained.IsZero() && t.Expiry.After(t.Obtained) {
		if half := t.Expiry.Sub(t.Obtained) / 2; half < m {
			m = half
		}
	}
	return m
}

func (c *Coordinator) needsRefresh(t *Token, now time.Time) bool {
	if t.Expiry.IsZero() {
		return false // no known expiry: only a 401 says it is stale
	}
	return !now.Before(t.Expiry.Add(-c.margin(t)))
}

// Refresh refreshes key's grant, sharing one flight among all concurrent
// callers. observed is the token the caller holds (nil: whatever is
// stored); when the stored token already differs from it, or is not due,
// no request is sent and the stored token is returned.
func (c *Coordinator) Refresh(ctx context.Context, key, trigger string, observed *Token) (*Token, error) {
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

func (c *Coordinator) run(key string, st *keyState, trigger string, observed *Token, f *flight) {
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
		c.opts.Metrics.WithLabelValues(info.Outcome).Inc()
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

func fingerprint(gen int64, refreshToken, clientID string) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d\x00%s\x00%s", gen, refreshToken, clientID)))
	return hex.EncodeToString(sum[:8])
}

func (c *Coordinator) fly(ctx context.Context, key string, st *keyState, src GrantSource, trigger string, observed *Token, info *FlightInfo) (*Token, error) {
	cur, err := c.store.Token(ctx, key)
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

	// Never send an empty client_id, and never a refresh without a token.
	if client == nil || client.ClientID == "" {
		e := &RefreshError{Class: OutcomeInvalidClient, Terminal: true,
			Msg: fmt.Sprintf("no OAuth client registration for %s: sign in again (mcpx login %s)", src.Server, src.Server)}
		c.fail(ctx, key, st, fp, e)
		info.Outcome = e.Class
		return nil, e
	}
	if cur.RefreshToken == "" {
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
	ot, rerr := c.requestRefresh(ctx, src, client, endpoint, cur.RefreshToken)
	secrets := []string{cur.RefreshToken, cur.AccessToken, client.ClientSecret}
	if rerr != nil {
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
	next := &Token{
		AccessToken:  ot.AccessToken,
		RefreshToken: ot.RefreshToken,
		TokenType:    ot.TokenType,
		Scopes:       cur.Scopes,
		Generation:   cur.Generation,
		Obtained:     now,
	}
	if ot.ExpiresIn > 0 {
		next.Expiry = now.Add(time.Duration(ot.ExpiresIn) * time.Second)
	}
	if sc, ok := ot.Extra("scope").(string); ok && sc != "" {
		next.Scopes = strings.Fields(sc)
	}
	superseded := false
	err = c.store.UpdateToken(ctx, key, src.Server, func(latest *Token) (*Token, error) {
		if latest == nil || latest.Generation != cur.Generation || latest.RefreshToken != cur.RefreshToken {
			superseded = true
			return nil, nil
		}
		return next, nil
	})
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
	c.saveState(ctx, key, RefreshState{LastRefresh: now, LastOutcome: OutcomeSuccess})
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
	if latest.Generation != cur.Generation || latest.RefreshToken != cur.RefreshToken {
		return latest, true
	}
	return nil, false
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
	c.mu.Unlock()
	class := "transient"
	latched := ""
	if e.Terminal {
		class, latched = "terminal", e.Msg
	}
	c.saveState(ctx, key, RefreshState{LastRefresh: now, LastOutcome: e.Class, LastClass: class, Latched: latched})
}

func (c *Coordinator) saveState(ctx context.Context, key string, rs RefreshState) {
	if err := c.store.SaveState(ctx, key, rs); err != nil {
		c.log.Warn("oauth: save refresh state", "error", redact.Text(err.Error()))
	}
}

func (c *Coordinator) requestRefresh(ctx context.Context, src GrantSource, client *Client, endpoint, refreshToken string) (*oauth2.Token, error) {
	cfg := &oauth2.Config{
		ClientID:     client.ClientID,
		ClientSecret: client.ClientSecret,
		Endpoint:     oauth2.Endpoint{TokenURL: endpoint, AuthStyle: authStyle(client)},
	}
	hc := src.HTTPClient
	if hc == nil {
		hc = discovery.NewHTTPClient(nil, 0)
	}
	if src.Resource != "" {
		hc = withFormParams(hc, endpoint, url.Values{"resource": {src.Resource}})
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, hc)
	t, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: refreshToken}).Token()
	if err != nil {
		return nil, err
	}
	if t.AccessToken == "" {
		return nil, errors.New("token response has no access_token")
	}
	return t, nil
}

func authStyle(c *Client) oauth2.AuthStyle {
	switch {
	case c.ClientSecret == "" || c.AuthMethod == "none" || c.AuthMethod == "client_secret_post":
		return oauth2.AuthStyleInParams
	default:
		return oauth2.AuthStyleInHeader
	}
}

// withFormParams returns a copy of hc that adds params to form POSTs to
// tokenURL: the oauth2 package has no hook for extra refresh parameters.
func withFormParams(hc *http.Client, tokenURL string, params url.Values) *http.Client {
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	cp := *hc
	cp.Transport = &formParams{next: next, tokenURL: tokenURL, params: params}
	return &cp
}

type formParams struct {
	next     http.RoundTripper
	tokenURL string
	params   url.Values
}

func (f *formParams) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.Body == nil || req.URL.String() != f.tokenURL {
		return f.next.RoundTrip(req)
	}
	b, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read token request: %w", err)
	}
	v, err := url.ParseQuery(string(b))
	if err != nil {
		return nil, fmt.Errorf("parse token request: %w", err)
	}
	for k, vals := range f.params {
		if v.Get(k) == "" {
			v[k] = vals
		}
	}
	body := v.Encode()
	r2 := req.Clone(req.Context())
	r2.Body = io.NopCloser(strings.NewReader(body))
	r2.ContentLength = int64(len(body))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
	return f.next.RoundTrip(r2)
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

// Status is what `mcpx auth status` shows for a server.
type Status struct {
	Key             string    `json:"key"`
	Server          string    `json:"server"`
	SignedIn        bool      `json:"signed_in"`
	Expiry          time.Time `json:"expiry,omitzero"`
	HasRefreshToken bool      `json:"refresh_token"`
	Scopes          []string  `json:"scopes,omitempty"`
	LastRefresh     time.Time `json:"last_refresh,omitzero"`
	LastOutcome     string    `json:"last_outcome,omitempty"`
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

// RefreshDue runs a proactive refresh for every registered server whose
// token is due, and waits for them.
func (c *Coordinator) RefreshDue(ctx context.Context) {
	c.mu.Lock()
	keys := make([]string, 0, len(c.keys))
	for k := range c.keys {
		keys = append(keys, k)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, k := range keys {
		st, err := c.state(k)
		if err != nil {
			continue
		}
		t, err := c.current(ctx, k, st)
		if err != nil || t.RefreshToken == "" || !c.needsRefresh(t, c.opts.Now()) || c.held(ctx, k, st, t) {
			continue
		}
		wg.Go(func() { _, _ = c.Refresh(ctx, k, TriggerProactive, nil) })
	}
	wg.Wait()
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

// Run is the proactive refresher: every interval it refreshes the tokens
// that are due, until ctx ends.
func (c *Coordinator) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.RefreshDue(ctx)
		}
	}
}
