package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcpx-dev/mcpx/fixtures/oidcprovider"
	"github.com/mcpx-dev/mcpx/internal/discovery"
)

// oidcProvider runs node-oidc-provider (from MCPX_PEERS_DIR, see
// tools/peers) on loopback and returns its issuer. Skipped without the
// peers, failed instead when MCPX_REQUIRE_PEERS=1.
func oidcProvider(t *testing.T) (issuer string, tokenRequests func() int) {
	t.Helper()
	peers := os.Getenv("MCPX_PEERS_DIR")
	missing := "MCPX_PEERS_DIR is not set"
	if peers != "" {
		missing = oidcprovider.Missing(peers)
	}
	if missing != "" {
		if os.Getenv("MCPX_REQUIRE_PEERS") == "1" {
			t.Fatalf("%s not found (MCPX_REQUIRE_PEERS=1; run 'make peers')", missing)
		}
		t.Skipf("%s not found; set MCPX_PEERS_DIR to tools/peers after 'make peers' to run this test", missing)
	}
	p, err := oidcprovider.Start(oidcprovider.Options{PeersDir: peers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p.Issuer, func() int {
		n, err := p.TokenRequests()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// jarBrowser follows redirects with cookies, as the provider's
// interaction flow needs.
func jarBrowser(t *testing.T) func(string) error {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	return func(authURL string) error {
		resp, err := c.Get(authURL)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("browser ended on HTTP %d at %s", resp.StatusCode, resp.Request.URL.Path)
		}
		return nil
	}
}

// Against a real authorization server whose reuse detection revokes the
// grant if a second refresh with one token ever goes out: sign in, then
// 50 concurrent callers and a proactive refresh on an expired token send
// exactly one token request and the grant keeps working.
func TestOIDCProviderRefreshAtExpiry(t *testing.T) {
	issuer, tokenRequests := oidcProvider(t)
	rs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/oauth-protected-resource/mcp" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"resource": "http://" + r.Host + "/mcp", "authorization_servers": []string{issuer}, "scopes_supported": []string{"read"},
		})
	}))
	defer rs.Close()
	resource := rs.URL + "/mcp"
	ctx := context.Background()
	d, err := discovery.New(nil, discovery.WithStrictResource()).Discover(ctx, resource, nil, discovery.Overrides{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := NewStore(openDB(t))
	c := NewCoordinator(store, CoordinatorOptions{})
	key := ServerKey("oidc", resource)
	c.Sync(map[string]GrantSource{key: {Server: "oidc", Resource: d.ResourceIndicator,
		TokenEndpoint: func(context.Context) (string, error) { return d.Metadata.TokenEndpoint, nil }}})

	res, err := c.Login(ctx, LoginRequest{Key: key, Server: "oidc", Discovery: d, OpenURL: jarBrowser(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !res.RefreshToken || !res.NewRegistration {
		t.Fatalf("login = %+v", res)
	}

	for round := range 3 {
		if err := c.ExpireAccessToken(ctx, key); err != nil {
			t.Fatal(err)
		}
		before, sentBefore := tokenRequests(), c.TokenRequests(key)
		old, _ := store.Token(ctx, key)
		var wg sync.WaitGroup
		var failed atomic.Int32
		start := make(chan struct{})
		for range 50 {
			wg.Go(func() {
				<-start
				if _, err := c.Token(ctx, key); err != nil {
					failed.Add(1)
					t.Log(err)
				}
			})
		}
		wg.Go(func() {
			<-start
			if _, err := c.Refresh(ctx, key, TriggerProactive, nil); err != nil {
				failed.Add(1)
				t.Log(err)
			}
		})
		close(start)
		wg.Wait()
		if n := tokenRequests() - before; n != 1 || c.TokenRequests(key)-sentBefore != 1 {
			t.Fatalf("round %d: %d token requests at the provider, %d sent", round, n, c.TokenRequests(key)-sentBefore)
		}
		if failed.Load() != 0 {
			t.Fatalf("round %d: %d callers failed", round, failed.Load())
		}
		cur, _ := store.Token(ctx, key)
		if cur.RefreshToken == old.RefreshToken {
			t.Fatalf("round %d: refresh token not rotated", round)
		}
	}

	// The provider does detect reuse: presenting a rotated refresh token
	// revokes the grant, so the rounds above would have failed on a second
	// request.
	client, _ := store.Client(ctx, key)
	cur, _ := store.Token(ctx, key)
	cfg := &oauth2.Config{ClientID: client.ClientID, Endpoint: oauth2.Endpoint{TokenURL: d.Metadata.TokenEndpoint, AuthStyle: oauth2.AuthStyleInParams}}
	refresh := func(rt string) error {
		hc := withFormParams(http.DefaultClient, d.Metadata.TokenEndpoint, map[string][]string{"resource": {d.ResourceIndicator}})
		_, err := cfg.TokenSource(context.WithValue(ctx, oauth2.HTTPClient, hc), &oauth2.Token{RefreshToken: rt}).Token()
		return err
	}
	if err := refresh(cur.RefreshToken); err != nil {
		t.Fatalf("manual refresh: %v", err)
	}
	var re *oauth2.RetrieveError
	if err := refresh(cur.RefreshToken); !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
		t.Fatalf("reuse: %v", err)
	}
	if err := c.ExpireAccessToken(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Refresh(ctx, key, TriggerReactive, nil); !errors.Is(err, ErrAuthorizationRequired) {
		t.Fatalf("after reuse the grant still refreshed: %v", err)
	}
}
