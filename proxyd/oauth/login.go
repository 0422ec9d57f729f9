package oauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcpx-dev/mcpx/internal/discovery"
	"github.com/mcpx-dev/mcpx/internal/redact"
)

// Errors of the sign-in flow.
var (
	ErrPKCEUnsupported   = errors.New("authorization server does not advertise PKCE S256")
	ErrStateMismatch     = errors.New("authorization response state does not match the request")
	ErrIssuerMismatch    = errors.New("authorization response iss does not match the authorization server")
	ErrNoClientAvailable = errors.New("no way to obtain an OAuth client")
	ErrStepUpLimit       = errors.New("scope step-up attempted too many times")
	ErrResourceMismatch  = errors.New("protected resource metadata names a different resource")
)

// MaxStepUpAttempts bounds the authorization requests for a 403
// insufficient_scope, counting the sign-in whose token was refused.
const MaxStepUpAttempts = 3

// CallbackError is an error the authorization server sent to the
// redirect URI (RFC 6749 §4.1.2.1).
type CallbackError struct {
	Code, Description string
}

func (e *CallbackError) Error() string {
	msg := "authorization failed: " + sanitize(e.Code)
	if e.Description != "" {
		msg += ": " + sanitize(e.Description)
	}
	return msg
}

// sanitize makes server-supplied text one bounded line without terminal
// control sequences.
func sanitize(s string) string {
	s = strings.Join(strings.Fields(redact.Control(s)), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// CheckPKCE refuses an authorization server that does not advertise S256.
// When code_challenge_methods_supported is absent the MCP spec says to
// refuse; allowMissing (config allow_missing_pkce_methods) proceeds with
// S256 anyway.
func CheckPKCE(md *discovery.ServerMetadata, allowMissing bool) error {
	switch {
	case md == nil:
		return fmt.Errorf("%w: no metadata", ErrPKCEUnsupported)
	case len(md.CodeChallengeMethodsSupported) == 0:
		if allowMissing {
			return nil
		}
		return fmt.Errorf("%w: code_challenge_methods_supported is absent; set allow_missing_pkce_methods: true for this server to sign in with S256 anyway", ErrPKCEUnsupported)
	case !slices.Contains(md.CodeChallengeMethodsSupported, "S256"):
		return fmt.Errorf("%w (advertised: %s)", ErrPKCEUnsupported, sanitize(strings.Join(md.CodeChallengeMethodsSupported, ", ")))
	}
	return nil
}

// RandomState returns an unguessable state value.
func RandomState() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// RegisterClient registers a public native client by RFC 7591.
func RegisterClient(ctx context.Context, hc *http.Client, endpoint, redirectURI, clientName string) (*Client, error) {
	if clientName == "" {
		clientName = "mcpx"
	}
	body, _ := json.Marshal(map[string]any{
		"client_name":                clientName,
		"redirect_uris":              []string{redirectURI},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
		"application_type":           "native",
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("client registration: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if hc == nil {
		hc = discovery.NewHTTPClient(nil, 30*time.Second)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client registration: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("client registration: read response: %w", err)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
			Desc  string `json:"error_description"`
		}
		_ = json.Unmarshal(raw, &e)
		return nil, fmt.Errorf("client registration refused: HTTP %d %s %s", resp.StatusCode, sanitize(e.Error), sanitize(e.Desc))
	}
	var out struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		AuthMethod   string `json:"token_endpoint_auth_method"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("client registration: malformed response: %w", err)
	}
	if out.ClientID == "" {
		return nil, errors.New("client registration: response has no client_id")
	}
	return &Client{ClientID: out.ClientID, ClientSecret: out.ClientSecret, Registered: true, RedirectURI: redirectURI, AuthMethod: out.AuthMethod}, nil
}

// AuthParams are the parameters of an authorization request.
type AuthParams struct {
	AuthorizationEndpoint string
	ClientID              string
	RedirectURI           string
	Scopes                []string
	State                 string
	Verifier              string // PKCE code verifier (oauth2.GenerateVerifier)
	Resource              string // RFC 8707
}

// BuildAuthURL returns the authorization URL: code flow, PKCE S256, state
// and resource.
func BuildAuthURL(p AuthParams) (string, error) {
	u, err := url.Parse(p.AuthorizationEndpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return "", fmt.Errorf("authorization endpoint %q is not an http(s) URL", p.AuthorizationEndpoint)
	}
	if p.ClientID == "" || p.State == "" || p.Verifier == "" {
		return "", errors.New("authorization request needs a client_id, state and PKCE verifier")
	}
	cfg := &oauth2.Config{ClientID: p.ClientID, RedirectURL: p.RedirectURI, Scopes: p.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: p.AuthorizationEndpoint}}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(p.Verifier)}
	if p.Resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", p.Resource))
	}
	return cfg.AuthCodeURL(p.State, opts...), nil
}

// ExchangeParams are the inputs of the authorization-code exchange.
type ExchangeParams struct {
	TokenEndpoint   string
	Issuer          string  // audience of a private_key_jwt assertion
	Client          *Client // resolved
	Code            string
	Verifier        string
	RedirectURI     string
	Resource        string
	RequestedScopes []string // recorded when the response names none
	DPoPKey         string   // bind the grant to this key (RFC 9449); "" for bearer
	HTTPClient      *http.Client
	Now             func() time.Time
}

// Exchange trades an authorization code for a token.
func Exchange(ctx context.Context, p ExchangeParams) (*Token, error) {
	if p.Client == nil || p.Client.ClientID == "" {
		return nil, errors.New("code exchange without a client_id")
	}
	tr := tokenRequest{Endpoint: p.TokenEndpoint, Issuer: p.Issuer, Client: p.Client, Resource: p.Resource,
		DPoPKey: p.DPoPKey, HTTP: p.HTTPClient, Now: p.Now}
	ot, err := retryNonce(p.DPoPKey != "", func() (*oauth2.Token, error) { return exchangeOnce(ctx, tr, p) })
	if err != nil {
		return nil, err
	}
	return tokenFrom(ot, p.RequestedScopes, tr.now()), nil
}

func exchangeOnce(ctx context.Context, tr tokenRequest, p ExchangeParams) (*oauth2.Token, error) {
	style, params, err := tr.auth()
	if err != nil {
		return nil, err
	}
	secret := p.Client.ClientSecret
	if p.Client.authMethod() == "private_key_jwt" {
		secret = ""
	}
	cfg := &oauth2.Config{ClientID: p.Client.ClientID, ClientSecret: secret, RedirectURL: p.RedirectURI,
		Endpoint: oauth2.Endpoint{TokenURL: p.TokenEndpoint, AuthStyle: style}}
	opts := []oauth2.AuthCodeOption{oauth2.VerifierOption(p.Verifier)}
	for k := range params {
		opts = append(opts, oauth2.SetAuthURLParam(k, params.Get(k)))
	}
	return cfg.Exchange(context.WithValue(ctx, oauth2.HTTPClient, tr.httpClient()), p.Code, opts...)
}

// StepUpScopes is the scope set to request after a 403 insufficient_scope:
// the union of what was granted and what the challenge asks for.
func StepUpScopes(granted, challenged []string) []string {
	out := slices.Clone(granted)
	for _, s := range challenged {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// CallbackOptions configure the loopback redirect listener.
type CallbackOptions struct {
	// PreferredRedirectURI is tried first so that a registered redirect
	// URI stays valid across sign-ins; when its port is taken another is
	// chosen.
	PreferredRedirectURI string
	State                string
	Issuer               string // expected iss (RFC 9207)
	IssRequired          bool   // the server advertises the iss parameter
	Server               string // shown on the page
}

// Callback is the loopback listener that receives the authorization
// response and shows the user a page saying what happened.
type Callback struct {
	mu       sync.Mutex
	opts     CallbackOptions
	ln       net.Listener
	srv      *http.Server
	redirect string
	once     sync.Once
	result   chan callbackResult
}

type callbackResult struct {
	code string
	err  error
}

// ListenCallback listens on 127.0.0.1 (path /callback).
func ListenCallback(opts CallbackOptions) (*Callback, error) {
	var ln net.Listener
	if u, err := url.Parse(opts.PreferredRedirectURI); err == nil && u.Hostname() == "127.0.0.1" && u.Port() != "" && u.Path == "/callback" {
		ln, _ = net.Listen("tcp", "127.0.0.1:"+u.Port())
	}
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("callback listener: %w", err)
		}
	}
	cb := &Callback{opts: opts, ln: ln, redirect: "http://" + ln.Addr().String() + "/callback", result: make(chan callbackResult, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", cb.handle)
	cb.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = cb.srv.Serve(ln) }()
	return cb, nil
}

// RedirectURI is the redirect URI this listener serves.
func (cb *Callback) RedirectURI() string { return cb.redirect }

// SetExpected sets the state and issuer to check (before the browser is
// sent to the authorization URL).
func (cb *Callback) SetExpected(state, issuer string, issRequired bool) {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	cb.opts.State, cb.opts.Issuer, cb.opts.IssRequired = state, issuer, issRequired
}

// Wait returns the authorization code, or why there is none.
func (cb *Callback) Wait(ctx context.Context) (string, error) {
	select {
	case r := <-cb.result:
		return r.code, r.err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return "", fmt.Errorf("no sign-in was completed in the browser in time (open the URL printed above, or give 'mcpx login' a longer --timeout): %w", ctx.Err())
		}
		return "", fmt.Errorf("waiting for the browser sign-in: %w", ctx.Err())
	}
}

// Close stops the listener.
func (cb *Callback) Close() error {
	if err := cb.srv.Close(); err != nil {
		return fmt.Errorf("close callback listener: %w", err)
	}
	return nil
}

func (cb *Callback) handle(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	cb.mu.Lock()
	opts := cb.opts
	cb.mu.Unlock()
	var res callbackResult
	switch {
	case opts.State == "" || q.Get("state") != opts.State:
		res.err = ErrStateMismatch
	case q.Get("iss") != "" && q.Get("iss") != opts.Issuer:
		res.err = fmt.Errorf("%w: got %q, want %q", ErrIssuerMismatch, sanitize(q.Get("iss")), opts.Issuer)
	case q.Get("iss") == "" && opts.IssRequired:
		res.err = fmt.Errorf("%w: the server advertises iss but sent none", ErrIssuerMismatch)
	case q.Get("error") != "":
		res.err = &CallbackError{Code: q.Get("error"), Description: q.Get("error_description")}
	case q.Get("code") == "":
		res.err = errors.New("authorization response has no code")
	default:
		res.code = q.Get("code")
	}
	delivered := false
	cb.once.Do(func() {
		cb.result <- res
		delivered = true
	})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	server := html.EscapeString(sanitize(opts.Server))
	switch {
	case !delivered:
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, page("Already done", "This sign-in has already completed. You can close this tab."))
	case res.err != nil:
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, page("Sign-in failed", "mcpx could not sign in to "+server+": "+html.EscapeString(res.err.Error())+". Return to the terminal for details."))
	default:
		fmt.Fprint(w, page("Signed in", "mcpx is finishing the sign-in to "+server+". You can close this tab and return to the terminal."))
	}
}

func page(title, body string) string {
	return "<!doctype html><html><head><meta charset=\"utf-8\"><title>mcpx: " + title + "</title></head>" +
		"<body style=\"font-family:sans-serif;max-width:40em;margin:4em auto\"><h1>" + title + "</h1><p>" + body + "</p></body></html>"
}

// LoginRequest is one `mcpx login SERVER`.
type LoginRequest struct {
	Key, Server string
	// Discovery is the discovered chain (with overrides applied).
	Discovery *discovery.Result
	// Configured is the config's oauth.client_id / client_secret, if any.
	Configured *Client
	// ClientMetadataURL is the config's client ID metadata document URL,
	// used when the server advertises CIMD support.
	ClientMetadataURL       string
	AllowMissingPKCEMethods bool
	Scopes                  []string // nil: Discovery.Scopes
	// DPoP binds the grant to a new key when the authorization server
	// supports it (config oauth.dpop).
	DPoP       bool
	ClientName string
	HTTPClient *http.Client
	// OpenURL sends the user to the authorization URL (opens a browser or
	// prints it). Required.
	OpenURL func(authURL string) error
}

// LoginResult is what a sign-in got.
type LoginResult struct {
	Generation      int64     `json:"generation"`
	Scopes          []string  `json:"scopes,omitempty"`
	Expiry          time.Time `json:"expiry,omitzero"`
	RefreshToken    bool      `json:"refresh_token"`
	ClientID        string    `json:"client_id"`
	ClientSource    string    `json:"client_source"` // configured|metadata_document|registered
	NewRegistration bool      `json:"new_registration,omitempty"`
	Warnings        []string  `json:"warnings,omitempty"`
}

// Login runs the authorization-code flow for req.Key and stores the grant,
// clearing any latched refresh failure.
func (c *Coordinator) Login(ctx context.Context, req LoginRequest) (*LoginResult, error) {
	d := req.Discovery
	if d == nil || d.Metadata == nil {
		return nil, errors.New("login: discovery result required")
	}
	if req.OpenURL == nil {
		return nil, errors.New("login: OpenURL required")
	}
	if d.ResourceMismatch {
		return nil, fmt.Errorf("login to %s: %w (%s)", req.Server, ErrResourceMismatch, strings.Join(d.Warnings, "; "))
	}
	md := d.Metadata
	if err := CheckPKCE(md, req.AllowMissingPKCEMethods); err != nil {
		return nil, fmt.Errorf("login to %s: %w", req.Server, err)
	}
	res := &LoginResult{Warnings: slices.Clone(d.Warnings)}

	client, source, err := c.pickClient(ctx, req, md)
	if err != nil {
		return nil, err
	}
	preferred := ""
	if client != nil {
		preferred = client.RedirectURI
	}
	cb, err := ListenCallback(CallbackOptions{PreferredRedirectURI: preferred, Server: req.Server})
	if err != nil {
		return nil, err
	}
	defer cb.Close()

	if client == nil || (source == "registered" && client.RedirectURI != cb.RedirectURI()) {
		if md.RegistrationEndpoint == "" {
			return nil, fmt.Errorf("login to %s: %w: no registration endpoint; configure oauth.client_id", req.Server, ErrNoClientAvailable)
		}
		client, err = RegisterClient(ctx, req.HTTPClient, md.RegistrationEndpoint, cb.RedirectURI(), req.ClientName)
		if err != nil {
			return nil, fmt.Errorf("login to %s: %w", req.Server, err)
		}
		client.Issuer = md.Issuer
		if err := c.store.SaveClient(ctx, req.Key, client); err != nil {
			return nil, err
		}
		source, res.NewRegistration = "registered", true
	}
	res.ClientID, res.ClientSource = client.ClientID, source

	scopes := req.Scopes
	if scopes == nil {
		scopes = d.Scopes
	}
	state, verifier := RandomState(), oauth2.GenerateVerifier()
	cb.SetExpected(state, md.Issuer, md.AuthorizationResponseIssParameterSupported)
	authURL, err := BuildAuthURL(AuthParams{AuthorizationEndpoint: md.AuthorizationEndpoint, ClientID: client.ClientID,
		RedirectURI: cb.RedirectURI(), Scopes: scopes, State: state, Verifier: verifier, Resource: d.ResourceIndicator})
	if err != nil {
		return nil, fmt.Errorf("login to %s: %w", req.Server, err)
	}
	if err := req.OpenURL(authURL); err != nil {
		return nil, fmt.Errorf("login to %s: open the authorization URL: %w", req.Server, err)
	}
	code, err := cb.Wait(ctx)
	if err != nil {
		return nil, fmt.Errorf("login to %s: %w", req.Server, err)
	}
	resolved, err := client.resolve()
	if err != nil {
		return nil, fmt.Errorf("login to %s: %w", req.Server, err)
	}
	fitAuthMethod(resolved, md)
	key, err := c.grantKey(req.DPoP, md, res)
	if err != nil {
		return nil, fmt.Errorf("login to %s: %w", req.Server, err)
	}
	tok, err := Exchange(ctx, ExchangeParams{TokenEndpoint: md.TokenEndpoint, Issuer: md.Issuer, Client: resolved, Code: code, Verifier: verifier,
		RedirectURI: cb.RedirectURI(), Resource: d.ResourceIndicator, RequestedScopes: scopes, DPoPKey: key,
		HTTPClient: req.HTTPClient, Now: c.opts.Now})
	if err != nil {
		e := c.ExchangeFailed(ctx, req.Key, client, err)
		e.Msg = redact.Text(e.Msg, code, verifier, resolved.ClientSecret, resolved.PrivateKey)
		return nil, fmt.Errorf("login to %s: %w", req.Server, e)
	}
	bind(tok, key, md.Issuer, res)
	gen, err := c.SaveLogin(ctx, req.Key, req.Server, tok)
	if err != nil {
		return nil, err
	}
	res.Generation, res.Scopes, res.Expiry, res.RefreshToken = gen, tok.Scopes, tok.Expiry, tok.RefreshToken != ""
	if !res.RefreshToken {
		res.Warnings = append(res.Warnings, "no refresh token was issued: you will have to sign in again when the access token expires")
	}
	return res, nil
}

// pickClient chooses the client by the MCP priority: configured, then a
// client ID metadata document, then a stored registration (nil: register).
func (c *Coordinator) pickClient(ctx context.Context, req LoginRequest, md *discovery.ServerMetadata) (*Client, string, error) {
	if req.Configured != nil && req.Configured.ClientID != "" {
		cl := *req.Configured
		cl.Registered = false
		return &cl, "configured", nil
	}
	if md.ClientIDMetadataDocumentSupported && req.ClientMetadataURL != "" {
		cl := &Client{ClientID: req.ClientMetadataURL, Issuer: md.Issuer}
		if err := c.store.SaveClient(ctx, req.Key, cl); err != nil {
			return nil, "", err
		}
		return cl, "metadata_document", nil
	}
	stored, err := c.store.Client(ctx, req.Key)
	switch {
	case err == nil && stored.Registered && (stored.Issuer == "" || stored.Issuer == md.Issuer):
		return stored, "registered", nil
	case err != nil && !errors.Is(err, ErrNoClient):
		return nil, "", err
	}
	return nil, "registered", nil
}

// Revoke asks the authorization server to revoke token (RFC 7009);
// hint is "refresh_token" or "access_token". Revoking a refresh token
// ends the whole grant at servers that implement it.
func Revoke(ctx context.Context, hc *http.Client, endpoint string, client *Client, token, hint string) error {
	if endpoint == "" {
		return errors.New("revoke: the authorization server has no revocation endpoint")
	}
	if client == nil || client.ClientID == "" {
		return errors.New("revoke: no client_id")
	}
	client, err := client.resolve()
	if err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	form := url.Values{"token": {token}}
	if hint != "" {
		form.Set("token_type_hint", hint)
	}
	style, params, err := tokenRequest{Endpoint: endpoint, Client: client}.auth()
	if err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	for k := range params {
		if k != "resource" {
			form.Set(k, params.Get(k))
		}
	}
	useBasic := style == oauth2.AuthStyleInHeader
	if !useBasic {
		form.Set("client_id", client.ClientID)
		if client.ClientSecret != "" && client.authMethod() != "private_key_jwt" {
			form.Set("client_secret", client.ClientSecret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if useBasic {
		req.SetBasicAuth(url.QueryEscape(client.ClientID), url.QueryEscape(client.ClientSecret))
	}
	if hc == nil {
		hc = discovery.NewHTTPClient(nil, 30*time.Second)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("revoke: %s", redact.Text(err.Error(), token, client.ClientSecret))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("revoke: HTTP %d", resp.StatusCode)
	}
	return nil
}

// grantKey returns a new DPoP key for a sign-in when dpop asks for one
// and the authorization server supports it ("" otherwise, with a warning
// in res when it was asked for).
func (c *Coordinator) grantKey(dpop bool, md *discovery.ServerMetadata, res *LoginResult) (string, error) {
	if !dpop {
		return "", nil
	}
	if !SupportsDPoP(md) {
		res.Warnings = append(res.Warnings, "oauth.dpop is set but the authorization server does not advertise DPoP with ES256: tokens are bearer tokens")
		return "", nil
	}
	return NewDPoPKey()
}

// bind records the issuer and the DPoP key of a new grant: a server that
// answered a proof with a bearer token keeps no key.
func bind(tok *Token, key, issuer string, res *LoginResult) {
	tok.Issuer = issuer
	if key == "" {
		return
	}
	if !strings.EqualFold(tok.TokenType, "DPoP") {
		res.Warnings = append(res.Warnings, "the authorization server answered the DPoP proof with a "+sanitize(tok.TokenType)+" token: it is used as a bearer token")
		return
	}
	tok.DPoPKey = key
}
