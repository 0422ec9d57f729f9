package discovery

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/mcpx-dev/mcpx/internal/redact"
)

// Option configures a Discoverer.
type Option func(*Discoverer)

// WithNow sets the clock (tests).
func WithNow(now func() time.Time) Option { return func(d *Discoverer) { d.now = now } }

// WithLogger sets the logger for once-per-server warnings.
func WithLogger(l *slog.Logger) Option { return func(d *Discoverer) { d.log = l } }

// WithCacheSize bounds the number of cached discoveries (LRU).
func WithCacheSize(n int) Option { return func(d *Discoverer) { d.maxEntries = max(n, 1) } }

// WithTTL sets how long successes and failures stay cached.
func WithTTL(success, failure time.Duration) Option {
	return func(d *Discoverer) { d.okTTL, d.failTTL = success, failure }
}

// WithStrictResource makes a resource mismatch an error (login) instead of
// a warning (probe).
func WithStrictResource() Option { return func(d *Discoverer) { d.strictResource = true } }

// Discoverer runs discovery with a cache: successes are kept 1 h, failures
// 30 s; concurrent identical discoveries share one fetch.
type Discoverer struct {
	fetcher
	now            func() time.Time
	log            *slog.Logger
	okTTL, failTTL time.Duration
	maxEntries     int
	fetchTimeout   time.Duration

	sf singleflight.Group

	mu      sync.Mutex
	entries map[string]*entry
	lru     *list.List // front = most recent; values are *entry
	epochs  map[string]uint64
	warned  map[string]bool
}

type entry struct {
	key, server string
	hint        string // resource_metadata URL this entry was fetched with or found
	docs        *docs
	err         error
	expires     time.Time
	elem        *list.Element
}

// New returns a Discoverer using client (nil: NewHTTPClient(nil, 30s)).
func New(client *http.Client, opts ...Option) *Discoverer {
	if client == nil {
		client = NewHTTPClient(nil, 30*time.Second)
	}
	d := &Discoverer{
		fetcher:      fetcher{client: client},
		now:          time.Now,
		log:          slog.New(slog.DiscardHandler),
		okTTL:        time.Hour,
		failTTL:      30 * time.Second,
		maxEntries:   256,
		fetchTimeout: 60 * time.Second,
		entries:      map[string]*entry{},
		lru:          list.New(),
		epochs:       map[string]uint64{},
		warned:       map[string]bool{},
	}
	for _, o := range opts {
		o(d)
	}
	return d
}

// Invalidate drops every cached discovery of serverURL; fetches already in
// flight for it will not be stored.
func (d *Discoverer) Invalidate(serverURL string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.invalidateLocked(serverURL)
}

func (d *Discoverer) invalidateLocked(serverURL string) {
	d.epochs[serverURL]++
	for k, e := range d.entries {
		if e.server == serverURL {
			d.lru.Remove(e.elem)
			delete(d.entries, k)
		}
	}
}

func cacheKey(serverURL string, ov Overrides) string {
	return strings.Join([]string{serverURL, ov.AuthorizationEndpoint, ov.TokenEndpoint, ov.RegistrationEndpoint, ov.AuthServerMetadataURL}, "\x00")
}

// Discover walks the chain for serverURL. ch is the Bearer challenge of a
// 401 (may be nil); a resource_metadata URL in it that differs from the
// cached one invalidates the cache. configuredScopes, when set, are the
// scopes to request as they are.
func (d *Discoverer) Discover(ctx context.Context, serverURL string, ch *Challenge, ov Overrides, configuredScopes []string) (*Result, error) {
	if err := ov.Validate(); err != nil {
		return nil, &Error{Step: StepOverrides, Err: err}
	}
	su, err := url.Parse(serverURL)
	if err != nil || !su.IsAbs() || su.Host == "" || (su.Scheme != "https" && su.Scheme != "http") {
		if err == nil {
			err = errors.New("not an absolute http(s) URL")
		}
		return nil, &Error{Step: StepServerURL, Err: err}
	}
	hint := ""
	if ch != nil {
		hint = ch.ResourceMetadata
	}
	key := cacheKey(serverURL, ov)

	d.mu.Lock()
	if e, ok := d.entries[key]; ok {
		switch {
		case hint != "" && e.hint != hint:
			// The server now points elsewhere: forget all it told us.
			d.invalidateLocked(serverURL)
		case d.now().Before(e.expires):
			d.lru.MoveToFront(e.elem)
			dc, derr := e.docs, e.err
			d.mu.Unlock()
			if derr != nil {
				return nil, derr
			}
			return d.result(dc, ch, configuredScopes, true), nil
		default:
			d.lru.Remove(e.elem)
			delete(d.entries, key)
		}
	}
	epoch := d.epochs[serverURL]
	d.mu.Unlock()

	sfKey := fmt.Sprintf("%s\x00%d\x00%s", key, epoch, hint)
	return d.shared(ctx, sfKey, key, su, serverURL, epoch, hint, ch, configuredScopes, func(fctx context.Context) (*docs, error) {
		return d.fetch(fctx, su, hint, ov)
	})
}

// shared runs fetch once for every concurrent caller of sfKey, on a
// context detached from any one caller, caches what it found under key,
// and shapes the result for this caller.
func (d *Discoverer) shared(ctx context.Context, sfKey, key string, su *url.URL, serverURL string, epoch uint64, hint string,
	ch *Challenge, configuredScopes []string, fetch func(context.Context) (*docs, error)) (*Result, error) {
	resCh := d.sf.DoChan(sfKey, func() (any, error) {
		// A flight that finished between our cache miss and this one
		// starting has already stored its result.
		if e := d.lookup(key, hint); e != nil {
			return e.docs, e.err
		}
		fctx, cancel := context.WithTimeout(detach(ctx), d.fetchTimeout)
		defer cancel()
		dc, ferr := fetch(fctx)
		d.store(key, serverURL, epoch, hint, dc, ferr)
		return dc, ferr
	})
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("oauth discovery of %s: %w", redact.URL(su.String()), ctx.Err())
	case r := <-resCh:
		if r.Err != nil {
			return nil, r.Err
		}
		dc := r.Val.(*docs)
		d.warnOnce(serverURL, dc)
		return d.result(dc, ch, configuredScopes, false), nil
	}
}

// lookup returns a fresh cache entry usable for hint.
func (d *Discoverer) lookup(key, hint string) *entry {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.entries[key]
	if !ok || (hint != "" && e.hint != hint) || !d.now().Before(e.expires) {
		return nil
	}
	return e
}

func (d *Discoverer) store(key, server string, epoch uint64, hint string, dc *docs, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.epochs[server] != epoch {
		return // invalidated while fetching
	}
	ttl := d.okTTL
	if err != nil {
		ttl = d.failTTL
	}
	if dc != nil && dc.ResourceMetadataURL != "" {
		hint = dc.ResourceMetadataURL
	}
	if old, ok := d.entries[key]; ok {
		d.lru.Remove(old.elem)
	}
	e := &entry{key: key, server: server, hint: hint, docs: dc, err: err, expires: d.now().Add(ttl)}
	e.elem = d.lru.PushFront(e)
	d.entries[key] = e
	for d.lru.Len() > d.maxEntries {
		last := d.lru.Back()
		old := last.Value.(*entry)
		d.lru.Remove(last)
		delete(d.entries, old.key)
	}
}

func (d *Discoverer) warnOnce(server string, dc *docs) {
	if dc.Metadata == nil || !dc.Metadata.LacksRefreshGrant() {
		return
	}
	d.mu.Lock()
	first := !d.warned[server]
	d.warned[server] = true
	d.mu.Unlock()
	if first {
		d.log.Warn("authorization server does not offer refresh tokens; users must sign in again at every expiry",
			"server", server, "issuer", dc.Metadata.Issuer)
	}
}
