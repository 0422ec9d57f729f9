package proxyd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mcpx-dev/mcpx/internal/discovery"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/config"
	"github.com/mcpx-dev/mcpx/proxyd/oauth"
)

// proactiveInterval is how often the refresher looks for tokens about to
// expire.
const proactiveInterval = 10 * time.Second

// auth is proxyd's OAuth side: the token store, the refresh coordinator,
// and which servers hold a grant.
type auth struct {
	store *oauth.Store
	coord *oauth.Coordinator
	hc    *http.Client // the OAuth client: redirect policy, timeouts
	trust signInTrust  // clients of servers behind a private CA

	mu       sync.RWMutex
	signedIn map[string]bool // server key → a token is stored
	// challenges: server key → the last 401 challenge its connection got
	// while signed out (the scope to ask for at sign-in).
	challenges map[string]*discovery.Challenge
	keys       map[string]string // server name → server key (HTTP servers)
}

func (d *Daemon) initAuth() {
	counter := oauth.NewRefreshCounter()
	d.metrics.reg.MustRegister(counter)
	st := oauth.NewStore(d.db)
	d.auth = &auth{
		store:    st,
		hc:       discovery.NewHTTPClient(nil, 30*time.Second),
		signedIn: map[string]bool{},
		keys:     map[string]string{},
	}
	d.auth.coord = oauth.NewCoordinator(st, oauth.CoordinatorOptions{
		Logger:  d.log,
		Metrics: counter,
	})
}

// serverKey keys a server's grant by name and URL: a server renamed or
// pointed elsewhere needs a new sign-in.
func serverKey(s config.Server) string { return oauth.ServerKey(s.Name, s.URL) }

// configuredClient is the server's configured OAuth client. Its secret
// and key stay references here: the oauth package reads them at each
// token request.
func configuredClient(s config.Server) *oauth.Client {
	if s.OAuth == nil || s.OAuth.ClientID == "" {
		return nil
	}
	return &oauth.Client{ClientID: s.OAuth.ClientID, ClientSecret: s.OAuth.ClientSecret,
		PrivateKey: s.OAuth.PrivateKey, AuthMethod: s.OAuth.TokenEndpointAuthMethod}
}

// machineGrant is the server's grant when it needs no browser, else nil.
func (d *Daemon) machineGrant(s config.Server) *oauth.MachineGrant {
	o := s.OAuth
	switch o.EffectiveGrant() {
	case config.GrantClientCredentials:
		return &oauth.MachineGrant{Kind: oauth.GrantClientCredentials, Scopes: o.Scopes}
	case config.GrantJWTBearer:
		return &oauth.MachineGrant{Kind: oauth.GrantJWTBearer, Scopes: o.Scopes, Assertion: o.Assertion}
	case config.GrantTokenExchange:
		idp := o.IdentityProvider
		return &oauth.MachineGrant{Kind: oauth.GrantTokenExchange, Scopes: o.Scopes, IdP: &oauth.IdentityProvider{
			TokenEndpoint: d.idpTokenEndpoint(s, idp),
			Client:        &oauth.Client{ClientID: idp.ClientID, ClientSecret: idp.ClientSecret},
			IDToken:       idp.IDToken,
		}}
	}
	return nil
}

// idpTokenEndpoint is the enterprise IdP's token endpoint: configured,
// or discovered from its issuer (RFC 8414, then OpenID Connect).
func (d *Daemon) idpTokenEndpoint(s config.Server, idp *config.IdentityProvider) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		if idp.TokenEndpoint != "" {
			return idp.TokenEndpoint, nil
		}
		_, disc, err := d.oauthFor(s)
		if err != nil {
			return "", err
		}
		md, err := disc.AuthServerMetadata(ctx, idp.Issuer)
		if err != nil {
			return "", fmt.Errorf("discover the identity provider %s: %w", idp.Issuer, err)
		}
		if md.TokenEndpoint == "" {
			return "", fmt.Errorf("the identity provider %s advertises no token endpoint; set identity_provider.token_endpoint", idp.Issuer)
		}
		return md.TokenEndpoint, nil
	}
}

// issuer is the issuer of the server's authorization server, discovered
// when a token request first needs it.
func (d *Daemon) issuer(s config.Server) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		res, err := d.discover(ctx, s)
		if err != nil {
			return "", err
		}
		return res.Metadata.Issuer, nil
	}
}

// syncGrants gives the coordinator the grants of exactly these servers
// (every HTTP server), so a stored grant is refreshed proactively and on
// demand, and one whose server was removed, renamed or re-pointed no
// longer is.
func (d *Daemon) syncGrants(servers []config.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	keys := map[string]string{}
	signedIn := map[string]bool{}
	grants := map[string]oauth.GrantSource{}
	for _, s := range servers {
		if s.URL == "" {
			continue
		}
		key := serverKey(s)
		keys[s.Name] = key
		grants[key] = oauth.GrantSource{
			Server:        s.Name,
			TokenEndpoint: d.tokenEndpoint(s),
			Resource:      s.URL,
			Client:        configuredClient(s),
			HTTPClient:    d.oauthClient(s),
			Issuer:        d.issuer(s),
			Machine:       d.machineGrant(s),
		}
		_, err := d.auth.store.Token(ctx, key)
		signedIn[key] = err == nil
	}
	d.auth.coord.Sync(grants)
	d.auth.mu.Lock()
	d.auth.keys, d.auth.signedIn = keys, signedIn
	d.auth.mu.Unlock()
}

func (a *auth) isSignedIn(key string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.signedIn[key]
}

// grantOf is the key of the server's grant when one is stored: a map
// lookup, cheap enough for every call.
func (a *auth) grantOf(server string) (string, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	key, ok := a.keys[server]
	return key, ok && a.signedIn[key]
}

func (a *auth) setSignedIn(key string, v bool) {
	a.mu.Lock()
	a.signedIn[key] = v
	a.mu.Unlock()
}

// tokenEndpoint discovers the token endpoint when a refresh first needs it.
func (d *Daemon) tokenEndpoint(s config.Server) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		if s.OAuth != nil && s.OAuth.TokenEndpoint != "" {
			return s.OAuth.TokenEndpoint, nil
		}
		res, err := d.discover(ctx, s)
		if err != nil {
			return "", err
		}
		return res.Metadata.TokenEndpoint, nil
	}
}

// discover runs OAuth discovery for a server, starting from the 401
// challenge the server gives an unauthenticated request (RFC 9728).
func (d *Daemon) discover(ctx context.Context, s config.Server) (*discovery.Result, error) {
	var scopes []string
	if s.OAuth != nil {
		scopes = s.OAuth.Scopes
	}
	_, disc, err := d.oauthFor(s)
	if err != nil {
		return nil, err
	}
	ch := d.challenge(ctx, s)
	if ch == nil || ch.Scope == "" {
		// Servers that let initialize through unauthenticated challenge
		// only the requests behind it: take what the connection was told.
		if seen := d.auth.lastChallenge(serverKey(s)); seen != nil {
			ch = seen
		}
	}
	return disc.DiscoverServer(ctx, s.URL, ch, s.OAuth.Overrides(), scopes)
}

// noteChallenge keeps the Bearer (or DPoP) challenge of a 401 the server's
// connection got before any sign-in.
func (a *auth) noteChallenge(key string, resp *http.Response) {
	cs, _ := discovery.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	ch := discovery.BearerChallenge(cs)
	if ch == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.challenges == nil {
		a.challenges = map[string]*discovery.Challenge{}
	}
	a.challenges[key] = ch
}

func (a *auth) lastChallenge(key string) *discovery.Challenge {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.challenges[key]
}

// challenge asks the server for its Bearer challenge with an
// unauthenticated initialize, and a tools/list after it when initialize
// passes; nil when it gives none.
func (d *Daemon) challenge(ctx context.Context, s config.Server) *discovery.Challenge {
	initialize := `{"jsonrpc":"2.0","id":"mcpx-discovery","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcpx-proxyd","version":"` + d.opts.Version + `"}}}`
	ch, sid := d.ask(ctx, s, http.MethodPost, "initialize", initialize, "")
	if ch != nil {
		return ch
	}
	// A server that lets initialize through unauthenticated challenges the
	// requests after it, with the scope they need.
	ch, _ = d.ask(ctx, s, http.MethodPost, "tools/list", `{"jsonrpc":"2.0","id":"mcpx-discovery-list","method":"tools/list"}`, sid)
	if sid != "" {
		_, _ = d.ask(ctx, s, http.MethodDelete, "", "", sid) // end the probe's session
	}
	return ch
}

// ask sends one unauthenticated request and returns the challenge of a
// 401 or 403, and the session id the server gave.
func (d *Daemon) ask(ctx context.Context, s config.Server, method, rpc, body, sid string) (*discovery.Challenge, string) {
	req, err := http.NewRequestWithContext(ctx, method, s.URL, strings.NewReader(body))
	if err != nil {
		return nil, ""
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if rpc != "" {
		req.Header.Set("Mcp-Method", rpc)
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	for k, v := range s.Headers {
		req.Header.Set(k, v)
	}
	resp, err := d.oauthClient(s).Do(req)
	if err != nil {
		return nil, ""
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return nil, resp.Header.Get("Mcp-Session-Id")
	}
	cs, _ := discovery.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	return discovery.BearerChallenge(cs), ""
}

// bearerWrapper is the upstream transport layer that adds the server's
// access token once the user has signed in; servers without a grant are
// untouched (most need none).
func (d *Daemon) bearerWrapper(server string, next http.RoundTripper) http.RoundTripper {
	s, ok := d.config().Server(server)
	if !ok || s.URL == "" {
		return next
	}
	key := serverKey(*s)
	return &lazyBearer{next: next, bearer: oauth.NewBearerTransport(next, d.auth.coord, key), auth: d.auth, key: key, server: server}
}

type lazyBearer struct {
	next, bearer http.RoundTripper
	auth         *auth
	key, server  string
}

func (l *lazyBearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if !l.auth.isSignedIn(l.key) {
		resp, err := l.next.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusUnauthorized {
			l.auth.noteChallenge(l.key, resp)
		}
		return resp, err
	}
	resp, err := l.bearer.RoundTrip(req)
	if err != nil && errors.Is(err, oauth.ErrAuthorizationRequired) {
		// The comma ends what the redactor takes for an Authorization
		// header value in "authorization: <reason>".
		return nil, &callerr.AuthError{Reason: fmt.Sprintf("expired or revoked, sign in again: mcpx login %s", l.server), Err: err}
	}
	return resp, err
}
