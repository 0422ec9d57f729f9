package discovery

import (
	"container/list"
	"context"
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

	"golang.org/x/sync/singleflight"

	"github.com/mcpx-dev/mcpx/internal/redact"
)

// Steps of the discovery chain, as reported in *Error.
const (
	StepOverrides          = "overrides"
	StepServerURL          = "server_url"
	StepResourceMetadata   = "resource_metadata"
	StepResource           = "resource"
	StepAuthServer         = "authorization_server"
	StepAuthServerMetadata = "auth_server_metadata"
	StepEndpoints          = "endpoints"
)

// Sentinel causes wrapped in *Error.Err.
var (
	ErrNoAuthorizationServers = errors.New("protected resource metadata lists no authorization_servers")
	ErrResourceMismatch       = errors.New("protected resource metadata names a different resource")
	ErrIssuerMismatch         = errors.New("authorization server metadata issuer does not match")
	ErrMissingEndpoint        = errors.New("authorization server metadata lacks a required endpoint")
	ErrHTTPStatus             = errors.New("unexpected HTTP status")
)

// Error is a broken link of the discovery chain.
type Error struct {
	Step     string
	URL      string
	Status   int
	Err      error
	Attempts []Attempt
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("oauth discovery: ")
	b.WriteString(e.Step)
	if e.URL != "" {
		b.WriteString(": ")
		b.WriteString(e.URL)
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.Status)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Attempt is one URL discovery tried and what it answered.
type Attempt struct {
	URL    string `json:"url"`
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	Used   bool   `json:"used"`
	// Start and End time the fetch, for the probe's timeline.
	Start, End time.Time `json:"-"`
}

// Result is the outcome of a discovery.
type Result struct {
	ResourceMetadataURL   string
	Resource              *ProtectedResource
	AuthServerURL         string
	AuthServerMetadataURL string
	Metadata              *ServerMetadata // with overrides applied
	Attempts              []Attempt
	Overridden            []string // config fields that replaced discovered values
	Warnings              []string
	Scopes                []string // scopes to request

	// ResourceIndicator is the RFC 8707 resource to send in authorization
	// and token requests.
	ResourceIndicator string
	// ResourceMismatch is set when the protected-resource metadata names a
	// resource that does not cover the server URL (RFC 9728 §3.3). Login
	// must refuse; the probe warns.
	ResourceMismatch bool
	// Cached is set when the documents came from the discovery cache.
	Cached bool
}

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
	client         *http.Client
	now            func() time.Time
	log            *slog.Logger
	okTTL, failTTL time.Duration
	maxEntries     int
	strictResource bool
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

// docs is the cacheable part of a Result.
type docs struct {
	ResourceMetadataURL   string
	Resource              *ProtectedResource
	AuthServerURL         string
	AuthServerMetadataURL string
	Metadata              *ServerMetadata
	Attempts              []Attempt
	Overridden            []string
	Warnings              []string
	ResourceIndicator     string
	ResourceMismatch      bool
}

// New returns a Discoverer using client (nil: NewHTTPClient(nil, 30s)).
func New(client *http.Client, opts ...Option) *Discoverer {
	if client == nil {
		client = NewHTTPClient(nil, 30*time.Second)
	}
	d := &Discoverer{
		client:       client,
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

func (d *Discoverer) result(dc *docs, ch *Challenge, configured []string, cached bool) *Result {
	r := &Result{
		ResourceMetadataURL:   dc.ResourceMetadataURL,
		Resource:              dc.Resource,
		AuthServerURL:         dc.AuthServerURL,
		AuthServerMetadataURL: dc.AuthServerMetadataURL,
		Metadata:              dc.Metadata,
		Attempts:              slices.Clone(dc.Attempts),
		Overridden:            slices.Clone(dc.Overridden),
		Warnings:              slices.Clone(dc.Warnings),
		ResourceIndicator:     dc.ResourceIndicator,
		ResourceMismatch:      dc.ResourceMismatch,
		Cached:                cached,
	}
	r.Scopes = SelectScopes(configured, ch, dc.Resource, dc.Metadata)
	return r
}

// SelectScopes applies the scope rule: configured scopes as they are; else
// the challenge's scope; else the resource's scopes_supported, plus
// offline_access when the authorization server lists it; else none.
func SelectScopes(configured []string, ch *Challenge, pr *ProtectedResource, md *ServerMetadata) []string {
	if len(configured) > 0 {
		return slices.Clone(configured)
	}
	if ch != nil && strings.TrimSpace(ch.Scope) != "" {
		return strings.Fields(ch.Scope)
	}
	if pr == nil || len(pr.ScopesSupported) == 0 {
		return nil
	}
	out := slices.Clone(pr.ScopesSupported)
	if md != nil && slices.Contains(md.ScopesSupported, "offline_access") && !slices.Contains(out, "offline_access") {
		out = append(out, "offline_access")
	}
	return out
}

// fetch walks the chain with no cache.
func (d *Discoverer) fetch(ctx context.Context, su *url.URL, hint string, ov Overrides) (*docs, error) {
	dc := &docs{}

	// The overridden metadata URL does not depend on the resource
	// metadata: fetch both at once.
	type mdResult struct {
		md  *ServerMetadata
		att Attempt
		err error
	}
	var ovMD chan mdResult
	if ov.AuthServerMetadataURL != "" {
		ovMD = make(chan mdResult, 1)
		go func() {
			var m *ServerMetadata
			att, err := d.getJSON(ctx, ov.AuthServerMetadataURL, func(b []byte) error {
				var perr error
				m, perr = ParseServerMetadata(b)
				return perr
			})
			ovMD <- mdResult{m, att, err}
		}()
	}

	prm, prmURL, prmAtts, prmErr := d.fetchPRM(ctx, su, hint)
	dc.Attempts = append(dc.Attempts, prmAtts...)

	var om mdResult
	if ovMD != nil {
		om = <-ovMD
		dc.Attempts = append(dc.Attempts, om.att)
	}
	canServer, _ := canonicalResource(su.String())
	synthOK := ov.AuthorizationEndpoint != "" && ov.TokenEndpoint != ""

	if prmErr != nil {
		if ovMD == nil && !synthOK {
			prmErr.Attempts = dc.Attempts
			return nil, prmErr
		}
		dc.Warnings = append(dc.Warnings, "protected resource metadata unavailable ("+prmErr.Error()+"); using configured overrides")
		dc.ResourceIndicator = canServer
	} else {
		dc.Resource = prm
		dc.ResourceMetadataURL = prmURL
		if !resourceMatches(prm.Resource, su.String()) {
			dc.ResourceMismatch = true
			msg := fmt.Sprintf("protected resource metadata names resource %q, which does not match the server URL %s", prm.Resource, redact.URL(su.String()))
			if d.strictResource {
				return nil, &Error{Step: StepResource, URL: prmURL, Err: fmt.Errorf("%w: %s", ErrResourceMismatch, msg), Attempts: dc.Attempts}
			}
			dc.Warnings = append(dc.Warnings, msg)
			dc.ResourceIndicator = canServer
		} else {
			dc.ResourceIndicator = prm.Resource
		}
		if len(prm.AuthorizationServers) == 0 {
			if ovMD == nil && !synthOK {
				return nil, &Error{Step: StepAuthServer, URL: prmURL, Err: ErrNoAuthorizationServers, Attempts: dc.Attempts}
			}
			dc.Warnings = append(dc.Warnings, ErrNoAuthorizationServers.Error()+"; using configured overrides")
		} else {
			as := prm.AuthorizationServers[0]
			if _, err := parseFetchURL(as); err != nil {
				return nil, &Error{Step: StepAuthServer, URL: as, Err: err, Attempts: dc.Attempts}
			}
			dc.AuthServerURL = as
			if len(prm.AuthorizationServers) > 1 {
				dc.Warnings = append(dc.Warnings, fmt.Sprintf("%d authorization servers listed; using the first, %s", len(prm.AuthorizationServers), as))
			}
		}
	}

	// Authorization server metadata.
	var md *ServerMetadata
	switch {
	case ovMD != nil:
		if om.err != nil {
			if !synthOK {
				return nil, &Error{Step: StepAuthServerMetadata, URL: ov.AuthServerMetadataURL, Status: om.att.Status, Err: om.err, Attempts: dc.Attempts}
			}
			dc.Warnings = append(dc.Warnings, "authorization server metadata unavailable; using the configured endpoints")
		} else {
			md = om.md
			dc.AuthServerMetadataURL = ov.AuthServerMetadataURL
			if dc.AuthServerURL != "" && md.Issuer != dc.AuthServerURL {
				dc.Warnings = append(dc.Warnings, fmt.Sprintf("configured metadata issuer %q differs from the authorization server %q", md.Issuer, dc.AuthServerURL))
			}
		}
		dc.Overridden = append(dc.Overridden, "auth_server_metadata_url")
	case dc.AuthServerURL != "":
		m, mdURL, atts, err := d.fetchASMetadata(ctx, dc.AuthServerURL)
		dc.Attempts = append(dc.Attempts, atts...)
		switch {
		case err == nil:
			md = m
			dc.AuthServerMetadataURL = mdURL
			if md.Issuer != dc.AuthServerURL {
				if strings.TrimSuffix(md.Issuer, "/") != strings.TrimSuffix(dc.AuthServerURL, "/") {
					return nil, &Error{Step: StepAuthServerMetadata, URL: mdURL, Err: fmt.Errorf("%w: issuer %q, expected %q", ErrIssuerMismatch, md.Issuer, dc.AuthServerURL), Attempts: dc.Attempts}
				}
				dc.Warnings = append(dc.Warnings, fmt.Sprintf("issuer %q differs from %q by a trailing slash", md.Issuer, dc.AuthServerURL))
			}
		case synthOK:
			dc.Warnings = append(dc.Warnings, "authorization server metadata unavailable ("+err.Error()+"); using the configured endpoints")
		default:
			err.Attempts = dc.Attempts
			return nil, err
		}
	}
	if md == nil {
		// Only reachable with both endpoint overrides: the document is
		// built from them alone, never from guessed paths.
		md = &ServerMetadata{Issuer: dc.AuthServerURL}
	} else {
		cp := *md
		md = &cp
	}
	if ov.AuthorizationEndpoint != "" {
		md.AuthorizationEndpoint = ov.AuthorizationEndpoint
		dc.Overridden = append(dc.Overridden, "authorization_endpoint")
	}
	if ov.TokenEndpoint != "" {
		md.TokenEndpoint = ov.TokenEndpoint
		dc.Overridden = append(dc.Overridden, "token_endpoint")
	}
	if ov.RegistrationEndpoint != "" {
		md.RegistrationEndpoint = ov.RegistrationEndpoint
		dc.Overridden = append(dc.Overridden, "registration_endpoint")
	}
	for _, f := range []struct{ name, v string }{
		{"authorization_endpoint", md.AuthorizationEndpoint},
		{"token_endpoint", md.TokenEndpoint},
	} {
		if f.v == "" {
			return nil, &Error{Step: StepEndpoints, URL: dc.AuthServerMetadataURL, Err: fmt.Errorf("%w: no %s; set oauth.%s", ErrMissingEndpoint, f.name, f.name), Attempts: dc.Attempts}
		}
	}
	for _, f := range []struct {
		name string
		v    *string
		must bool
	}{
		{"authorization_endpoint", &md.AuthorizationEndpoint, true},
		{"token_endpoint", &md.TokenEndpoint, true},
		{"registration_endpoint", &md.RegistrationEndpoint, true},
		{"revocation_endpoint", &md.RevocationEndpoint, false},
	} {
		if *f.v == "" {
			continue
		}
		if _, err := parseFetchURL(*f.v); err != nil {
			if f.must {
				return nil, &Error{Step: StepEndpoints, URL: *f.v, Err: fmt.Errorf("%s: %w", f.name, err), Attempts: dc.Attempts}
			}
			dc.Warnings = append(dc.Warnings, fmt.Sprintf("%s ignored: %v", f.name, err))
			*f.v = ""
		}
	}
	dc.Metadata = md
	if md.LacksRefreshGrant() {
		dc.Warnings = append(dc.Warnings, "authorization server does not list refresh_token in grant_types_supported: users must sign in again at every expiry")
	}
	return dc, nil
}

// fetchPRM tries the challenge's resource_metadata URL, else the
// path-inserted well-known URL and then the root one.
func (d *Discoverer) fetchPRM(ctx context.Context, su *url.URL, hint string) (*ProtectedResource, string, []Attempt, *Error) {
	var candidates []string
	if hint != "" {
		candidates = []string{hint}
	} else {
		origin := su.Scheme + "://" + su.Host
		if p := strings.TrimSuffix(su.EscapedPath(), "/"); p != "" {
			candidates = append(candidates, origin+"/.well-known/oauth-protected-resource"+p)
		}
		candidates = append(candidates, origin+"/.well-known/oauth-protected-resource")
	}
	var atts []Attempt
	var last *Error
	for _, c := range candidates {
		var pr *ProtectedResource
		att, err := d.getJSON(ctx, c, func(b []byte) error {
			var perr error
			pr, perr = ParseProtectedResource(b)
			return perr
		})
		if err == nil {
			att.Used = true
			atts = append(atts, att)
			return pr, c, atts, nil
		}
		atts = append(atts, att)
		last = pickError(last, &Error{Step: StepResourceMetadata, URL: att.URL, Status: att.Status, Err: err})
	}
	return nil, "", atts, last
}

// ASMetadataURLs lists the metadata URLs of an issuer in the order the MCP
// spec prescribes (RFC 8414, then OpenID Connect, both insertion orders for
// an issuer with a path).
func ASMetadataURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, fmt.Errorf("parse issuer: %w", err)
	}
	origin := u.Scheme + "://" + u.Host
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	if p == "" {
		return []string{
			origin + "/.well-known/oauth-authorization-server",
			origin + "/.well-known/openid-configuration",
		}, nil
	}
	return []string{
		origin + "/.well-known/oauth-authorization-server" + p,
		origin + "/.well-known/openid-configuration" + p,
		origin + p + "/.well-known/openid-configuration",
	}, nil
}

func (d *Discoverer) fetchASMetadata(ctx context.Context, issuer string) (*ServerMetadata, string, []Attempt, *Error) {
	cands, err := ASMetadataURLs(issuer)
	if err != nil {
		return nil, "", nil, &Error{Step: StepAuthServerMetadata, URL: issuer, Err: err}
	}
	var atts []Attempt
	var last *Error
	for _, c := range cands {
		var m *ServerMetadata
		att, err := d.getJSON(ctx, c, func(b []byte) error {
			var perr error
			m, perr = ParseServerMetadata(b)
			return perr
		})
		if err == nil {
			att.Used = true
			atts = append(atts, att)
			return m, c, atts, nil
		}
		atts = append(atts, att)
		last = pickError(last, &Error{Step: StepAuthServerMetadata, URL: att.URL, Status: att.Status, Err: err})
	}
	return nil, "", atts, last
}

const maxDocument = 1 << 20

// getJSON fetches rawURL and hands the body of a 200 to decode.
func (d *Discoverer) getJSON(ctx context.Context, rawURL string, decode func([]byte) error) (att Attempt, err error) {
	att = Attempt{URL: rawURL, Start: time.Now()}
	defer func() { att.End = time.Now() }()
	u, err := parseFetchURL(rawURL)
	if err != nil {
		att.Error = err.Error()
		return att, err
	}
	att.URL = redact.URL(u.String())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		att.Error = err.Error()
		return att, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := d.client.Do(req)
	if err != nil {
		att.Error = err.Error()
		return att, fmt.Errorf("fetch %s: %w", att.URL, err)
	}
	defer resp.Body.Close()
	att.Status = resp.StatusCode
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		att.Error = err.Error()
		return att, fmt.Errorf("read %s: %w", att.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("%w %d", ErrHTTPStatus, resp.StatusCode)
		att.Error = err.Error()
		return att, err
	}
	if len(body) > maxDocument {
		err := fmt.Errorf("%w: larger than %d bytes", ErrMalformedMetadata, maxDocument)
		att.Error = err.Error()
		return att, err
	}
	if err := decode(body); err != nil {
		att.Error = err.Error()
		return att, err
	}
	return att, nil
}

// pickError keeps the more telling of two candidate failures: a 404 only
// says "not here", anything else says what is wrong.
func pickError(prev, next *Error) *Error {
	if prev != nil && prev.Status != http.StatusNotFound && next.Status == http.StatusNotFound {
		return prev
	}
	return next
}
