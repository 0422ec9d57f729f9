package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/oauth2"
)

// requestToken sends the token request of a flight: a refresh, or for a
// machine grant the grant again. It returns the values that must not
// appear in a message about it.
func (c *Coordinator) requestToken(ctx context.Context, src GrantSource, client *Client, endpoint string, cur *Token) (*oauth2.Token, []string, error) {
	secrets := []string{cur.RefreshToken, cur.AccessToken, client.ClientSecret}
	resolved, err := client.resolve()
	if err != nil {
		return nil, secrets, err
	}
	secrets = append(secrets, resolved.ClientSecret, resolved.PrivateKey)
	tr := tokenRequest{Endpoint: endpoint, Client: resolved, Resource: src.Resource, DPoPKey: cur.DPoPKey,
		HTTP: src.HTTPClient, Now: c.opts.Now}
	if src.Issuer != nil {
		if iss, err := src.Issuer(ctx); err == nil {
			tr.Issuer = iss
		}
	}
	if src.Machine != nil {
		g := *src.Machine
		if len(g.Scopes) == 0 {
			g.Scopes = cur.Scopes // what the sign-in was granted
		}
		ot, err := g.obtain(ctx, tr)
		return ot, secrets, err
	}
	ot, err := requestRefresh(ctx, tr, cur.RefreshToken)
	return ot, secrets, err
}

// requestRefresh spends refreshToken at tr's endpoint.
func requestRefresh(ctx context.Context, tr tokenRequest, refreshToken string) (*oauth2.Token, error) {
	return retryNonce(tr.DPoPKey != "", func() (*oauth2.Token, error) { return refreshOnce(ctx, tr, refreshToken) })
}

func refreshOnce(ctx context.Context, tr tokenRequest, refreshToken string) (*oauth2.Token, error) {
	style, params, err := tr.auth()
	if err != nil {
		return nil, err
	}
	secret := tr.Client.ClientSecret
	if tr.Client.authMethod() == "private_key_jwt" {
		secret = ""
	}
	cfg := &oauth2.Config{
		ClientID:     tr.Client.ClientID,
		ClientSecret: secret,
		Endpoint:     oauth2.Endpoint{TokenURL: tr.Endpoint, AuthStyle: style},
	}
	hc := tr.httpClient()
	if len(params) > 0 {
		hc = withFormParams(hc, tr.Endpoint, params)
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
	case c.ClientSecret == "" || c.AuthMethod == "none" || c.AuthMethod == "client_secret_post" || c.AuthMethod == "private_key_jwt":
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
