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

	"github.com/mcpx-dev/mcpx/internal/discovery"
)

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
