package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcpx-dev/mcpx/internal/discovery"
	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/internal/secretref"
)

// Grants that need no user: proxyd signs in and, at expiry, obtains the
// next token the same way (there is no refresh token to spend).
const (
	GrantClientCredentials = "client_credentials"
	GrantJWTBearer         = "jwt_bearer"     // workload identity (RFC 7523)
	GrantTokenExchange     = "token_exchange" // enterprise-managed (SEP-990)
)

// Grant type URIs of the token requests.
const (
	jwtBearerGrantType     = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	tokenExchangeGrantType = "urn:ietf:params:oauth:grant-type:token-exchange"
	idJAGTokenType         = "urn:ietf:params:oauth:token-type:id-jag"
	idTokenTokenType       = "urn:ietf:params:oauth:token-type:id_token"
)

// MachineGrant is a grant proxyd carries out by itself.
type MachineGrant struct {
	Kind   string // GrantClientCredentials, GrantJWTBearer or GrantTokenExchange
	Scopes []string
	// Assertion is the workload identity token of GrantJWTBearer: a
	// ${file:...} or ${env:...} reference, read again at every exchange
	// (CI systems and Kubernetes rotate it).
	Assertion string
	// IdP is the enterprise identity provider of GrantTokenExchange.
	IdP *IdentityProvider
}

// IdentityProvider exchanges the user's ID token for an identity
// assertion (ID-JAG) that the MCP server's authorization server accepts.
type IdentityProvider struct {
	// TokenEndpoint is configured, or discovered from the issuer.
	TokenEndpoint func(ctx context.Context) (string, error)
	Client        *Client // mcpx's client at the IdP
	IDToken       string  // reference, read at every exchange
}

// IdentitySource names where a grant's identity comes from, for status:
// the reference itself (a path or a variable name), never its value.
func (g *MachineGrant) IdentitySource() string {
	switch {
	case g == nil:
		return ""
	case g.Kind == GrantJWTBearer:
		return g.Assertion
	case g.Kind == GrantTokenExchange && g.IdP != nil:
		return g.IdP.IDToken
	}
	return ""
}

// tokenRequest is what any token request needs besides its grant.
type tokenRequest struct {
	Endpoint string
	Issuer   string  // the authorization server: audience of a client assertion
	Client   *Client // resolved (see Client.resolve)
	Resource string  // RFC 8707
	DPoPKey  string  // sign a proof with this key; "" for bearer
	HTTP     *http.Client
	Now      func() time.Time
}

// resolve returns c with its secret references read now. A registered
// client's secret is the registration's own.
func (c *Client) resolve() (*Client, error) {
	if c == nil || c.Registered {
		return c, nil
	}
	cp := *c
	var err error
	if cp.ClientSecret, err = secretref.Expand(c.ClientSecret); err != nil {
		return nil, fmt.Errorf("oauth client_secret: %w", err)
	}
	if cp.PrivateKey, err = secretref.Expand(c.PrivateKey); err != nil {
		return nil, fmt.Errorf("oauth private_key: %w", err)
	}
	return &cp, nil
}

// authMethod is how c authenticates at the token endpoint.
func (c *Client) authMethod() string {
	switch {
	case c.AuthMethod != "":
		return c.AuthMethod
	case c.PrivateKey != "":
		return "private_key_jwt"
	case c.ClientSecret == "":
		return "none"
	}
	return "client_secret_basic"
}

// fitAuthMethod picks client_secret_post for a configured secret when
// the authorization server lists it and not client_secret_basic.
func fitAuthMethod(c *Client, md *discovery.ServerMetadata) {
	if c == nil || c.AuthMethod != "" || c.ClientSecret == "" || md == nil {
		return
	}
	m := md.TokenEndpointAuthMethodsSupported
	if len(m) > 0 && !slices.Contains(m, "client_secret_basic") && slices.Contains(m, "client_secret_post") {
		c.AuthMethod = "client_secret_post"
	}
}

// auth returns how the client's credentials go into the request: the
// oauth2 auth style and the form parameters to add.
func (tr tokenRequest) auth() (oauth2.AuthStyle, url.Values, error) {
	params := url.Values{}
	if tr.Resource != "" {
		params.Set("resource", tr.Resource)
	}
	if tr.Client.authMethod() != "private_key_jwt" {
		return authStyle(tr.Client), params, nil
	}
	aud := tr.Issuer
	if aud == "" {
		aud = tr.Endpoint
	}
	a, err := clientAssertion(tr.Client.PrivateKey, tr.Client.ClientID, aud, tr.now())
	if err != nil {
		return 0, nil, err
	}
	params.Set("client_assertion_type", clientAssertionType)
	params.Set("client_assertion", a)
	return oauth2.AuthStyleInParams, params, nil
}

func (tr tokenRequest) now() time.Time {
	if tr.Now != nil {
		return tr.Now()
	}
	return time.Now()
}

// httpClient is the client of the request: the caller's, with a DPoP
// proof on every request when the grant is bound to a key.
func (tr tokenRequest) httpClient() *http.Client {
	hc := tr.HTTP
	if hc == nil {
		hc = discovery.NewHTTPClient(nil, 30*time.Second)
	}
	if tr.DPoPKey != "" {
		hc = withDPoP(hc, tr.DPoPKey, tr.now)
	}
	return hc
}

// secrets are the values of the request that must never be printed.
func (tr tokenRequest) secrets() []string {
	if tr.Client == nil {
		return nil
	}
	return []string{tr.Client.ClientSecret, tr.Client.PrivateKey}
}

// post sends one grant to the token endpoint with the client's
// authentication; grant_type and the grant's parameters are in params.
func (tr tokenRequest) post(ctx context.Context, grantType string, scopes []string, params url.Values) (*oauth2.Token, error) {
	return retryNonce(tr.DPoPKey != "", func() (*oauth2.Token, error) { return tr.postOnce(ctx, grantType, scopes, params) })
}

func (tr tokenRequest) postOnce(ctx context.Context, grantType string, scopes []string, params url.Values) (*oauth2.Token, error) {
	style, extra, err := tr.auth()
	if err != nil {
		return nil, err
	}
	for k, v := range params {
		extra[k] = v
	}
	extra.Set("grant_type", grantType)
	cfg := &clientcredentials.Config{
		ClientID: tr.Client.ClientID, ClientSecret: tr.Client.ClientSecret,
		TokenURL: tr.Endpoint, Scopes: scopes, EndpointParams: extra, AuthStyle: style,
	}
	if style == oauth2.AuthStyleInParams && tr.Client.authMethod() == "private_key_jwt" {
		cfg.ClientSecret = ""
	}
	t, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, tr.httpClient()))
	if err != nil {
		return nil, err
	}
	if t.AccessToken == "" {
		return nil, errors.New("token response has no access_token")
	}
	return t, nil
}

// obtain carries out the grant at the authorization server of tr.
func (g *MachineGrant) obtain(ctx context.Context, tr tokenRequest) (*oauth2.Token, error) {
	switch g.Kind {
	case GrantClientCredentials:
		return tr.post(ctx, "client_credentials", g.Scopes, nil)
	case GrantJWTBearer:
		a, err := secretref.Expand(g.Assertion)
		if err != nil {
			return nil, fmt.Errorf("workload identity token: %w", err)
		}
		if a = strings.TrimSpace(a); a == "" {
			return nil, fmt.Errorf("workload identity token %s is empty", g.Assertion)
		}
		return tr.post(ctx, jwtBearerGrantType, g.Scopes, url.Values{"assertion": {a}})
	case GrantTokenExchange:
		jag, err := g.identityAssertion(ctx, tr)
		if err != nil {
			return nil, err
		}
		return tr.post(ctx, jwtBearerGrantType, g.Scopes, url.Values{"assertion": {jag}})
	}
	return nil, fmt.Errorf("unknown grant %q", g.Kind)
}

// identityAssertion exchanges the user's ID token at the IdP (RFC 8693)
// for an identity assertion grant meant for tr's authorization server and
// resource.
func (g *MachineGrant) identityAssertion(ctx context.Context, tr tokenRequest) (string, error) {
	idp := g.IdP
	if idp == nil || idp.TokenEndpoint == nil {
		return "", errors.New("no identity provider configured")
	}
	endpoint, err := idp.TokenEndpoint(ctx)
	if err != nil {
		return "", fmt.Errorf("identity provider: %w", err)
	}
	idToken, err := secretref.Expand(idp.IDToken)
	if err != nil {
		return "", fmt.Errorf("identity provider id_token: %w", err)
	}
	if idToken = strings.TrimSpace(idToken); idToken == "" {
		return "", fmt.Errorf("identity provider id_token %s is empty", idp.IDToken)
	}
	client, err := idp.Client.resolve()
	if err != nil {
		return "", fmt.Errorf("identity provider: %w", err)
	}
	at := tokenRequest{Endpoint: endpoint, Client: client, HTTP: tr.HTTP, Now: tr.Now}
	t, err := at.post(ctx, tokenExchangeGrantType, g.Scopes, url.Values{
		"requested_token_type": {idJAGTokenType},
		"audience":             {tr.Issuer},
		"resource":             {tr.Resource},
		"subject_token":        {idToken},
		"subject_token_type":   {idTokenTokenType},
	})
	if err != nil {
		return "", &IdPError{Err: err, secrets: append(at.secrets(), idToken)}
	}
	if tt, _ := t.Extra("issued_token_type").(string); tt != "" && tt != idJAGTokenType {
		return "", fmt.Errorf("identity provider issued a %s, not an identity assertion grant", sanitize(tt))
	}
	return t.AccessToken, nil
}

// IdPError is a failed token exchange at the enterprise identity provider.
type IdPError struct {
	Err     error
	secrets []string
}

func (e *IdPError) Error() string {
	return "identity provider token exchange: " + redact.Text(e.Err.Error(), e.secrets...)
}

func (e *IdPError) Unwrap() error { return e.Err }

// tokenFrom is the stored form of a token response obtained at now.
func tokenFrom(ot *oauth2.Token, scopes []string, now time.Time) *Token {
	t := &Token{AccessToken: ot.AccessToken, RefreshToken: ot.RefreshToken, TokenType: ot.TokenType,
		Scopes: slices.Clone(scopes), Obtained: now}
	switch {
	case ot.ExpiresIn > 0:
		t.Expiry = now.Add(time.Duration(ot.ExpiresIn) * time.Second)
	case !ot.Expiry.IsZero():
		t.Expiry = ot.Expiry
	}
	if sc, ok := ot.Extra("scope").(string); ok && sc != "" {
		t.Scopes = strings.Fields(sc)
	}
	return t
}
