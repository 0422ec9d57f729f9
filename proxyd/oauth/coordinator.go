package oauth

import (
	"context"
	"errors"
	"fmt"
	"golang.org/x/sync/singleflight"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Trigger is what started a refresh.
type Trigger string

// Triggers of a refresh.
const (
	TriggerReactive     Trigger = "reactive"     // a call found the token expired
	TriggerProactive    Trigger = "proactive"    // the refresher, before expiry
	TriggerUnauthorized Trigger = "unauthorized" // an upstream answered 401 to a token
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
	// Issuer returns the authorization server's issuer, the audience of
	// client assertions and identity assertion grants; nil: the token
	// endpoint stands in.
	Issuer func(ctx context.Context) (string, error)
	// Machine, when set, is how the next token is obtained at expiry
	// instead of a refresh.
	Machine *MachineGrant
}

// FlightInfo describes one refresh flight, for the OnFlight hook.
type FlightInfo struct {
	Key, Server    string
	Trigger        Trigger
	Outcome        Outcome // empty when nothing was attempted
	NetworkSkipped bool    // no token request was sent
	Superseded     bool    // a sign-in replaced the grant meanwhile; result discarded
	Duration       time.Duration
	Err            error
}

// CoordinatorOptions configure a Coordinator; zero values take defaults.
type CoordinatorOptions struct {
	Timeout time.Duration // of a flight; default 30s
	// Lock serialises a grant's refresh across processes sharing the
	// store; default the store's own (see Store.Hold).
	Lock   GrantLock
	Now    func() time.Time
	Logger *slog.Logger
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
		cv.WithLabelValues(string(o))
	}
	return cv
}

// Coordinator runs at most one refresh per server key (see
// docs/architecture.md, "Sign-in and refresh").
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
	// reads shares one store read among the callers that find no token
	// cached (a restart under load, a sign-in made elsewhere).
	reads singleflight.Group
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
	if opts.Lock == nil {
		opts.Lock = store
	}
	return &Coordinator{store: store, opts: opts, log: opts.Logger, keys: map[string]*keyState{}}
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
	v, err, _ := c.reads.Do(key, func() (any, error) { return c.store.Token(ctx, key) })
	if errors.Is(err, ErrNoToken) {
		return nil, &NotSignedInError{Server: name}
	}
	if err != nil {
		return nil, err
	}
	t = v.(*Token)
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
		c.mu.Lock()
		machine := st.src.Machine != nil
		c.mu.Unlock()
		if err != nil || (t.RefreshToken == "" && !machine) || !c.needsRefresh(t, c.opts.Now()) || c.held(ctx, k, st, t) {
			continue
		}
		wg.Go(func() { _, _ = c.Refresh(ctx, k, TriggerProactive, nil) })
	}
	wg.Wait()
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
