package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/fixtures/oidcprovider"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// oidcProvider is node-oidc-provider run from tools/peers.
type oidcProvider struct {
	*oidcprovider.Provider
	issuer             string
	rsID, rsSecret     string // the MCP server's introspection client
	introspectEndpoint string
}

// startOIDCProvider runs the provider on a loopback port; skipped without
// the peers unless MCPX_REQUIRE_PEERS=1.
func startOIDCProvider(t *testing.T) *oidcProvider {
	t.Helper()
	peers := peersDir(t)
	if m := oidcprovider.Missing(peers); m != "" {
		if os.Getenv("MCPX_REQUIRE_PEERS") == "1" {
			t.Fatalf("%s missing (run 'make peers')", m)
		}
		t.Skipf("%s missing", m)
	}
	p := &oidcProvider{rsID: "mcp-resource-server", rsSecret: "rs-" + randHex(t, 16)}
	prov, err := oidcprovider.Start(oidcprovider.Options{PeersDir: peers, RSClientID: p.rsID, RSClientSecret: p.rsSecret})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = prov.Close()
		if t.Failed() {
			t.Logf("oidc-provider stderr:\n%s", prov.Stderr())
		}
	})
	p.Provider, p.issuer = prov, prov.Issuer
	var md struct {
		Introspection string `json:"introspection_endpoint"`
	}
	getJSON(t, p.issuer+"/.well-known/oauth-authorization-server", &md)
	if md.Introspection == "" {
		t.Fatal("oidc-provider advertises no introspection endpoint")
	}
	p.introspectEndpoint = md.Introspection
	return p
}

// tokenRequests is the provider's count of POST /token.
func (p *oidcProvider) tokenRequests(t *testing.T) int {
	t.Helper()
	n, err := p.TokenRequests()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// active asks the provider whether an access token is valid (RFC 7662),
// as a resource server does.
func (p *oidcProvider) active(token string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.introspectEndpoint,
		strings.NewReader(url.Values{"token": {token}, "token_type_hint": {"access_token"}}.Encode()))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(p.rsID), url.QueryEscape(p.rsSecret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var v struct {
		Active bool `json:"active"`
	}
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&v) == nil && v.Active
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// TestOIDCProviderEndToEnd signs in through the binary against a real
// authorization server, node-oidc-provider, whose reuse detection revokes
// the whole grant if a refresh token is ever presented twice: login, a
// call, the refresh drill with 50 callers (exactly one token request per
// expiry, the grant intact), logout.
func TestOIDCProviderEndToEnd(t *testing.T) {
	p := startOIDCProvider(t)
	mcp, err := mcpserver.Start(mcpserver.Options{
		Era:                  mcpserver.EraBoth,
		ValidateToken:        p.active,
		AuthorizationServers: []string{p.issuer},
		Scopes:               []string{"read"},
	})
	if err != nil {
		t.Fatalf("starting the protected MCP fixture: %v", err)
	}
	t.Cleanup(func() { _ = mcp.Close() })

	o := newOAuthEnv(t)
	o.writeConfig(oauthConfig("oidc", mcp.URL(), ""))
	o.up()
	var lr api.LoginResult
	o.runJSON(0, &lr, "login", "oidc", "--timeout", "30s")
	if !lr.RefreshToken || lr.ClientSource != "registered" {
		t.Fatalf("login = %+v, want a refresh token from a registered client", lr)
	}
	o.waitReady("oidc")
	r := o.mustRun("call", "oidc", "echo", "text=via-oidc-provider")
	if !strings.Contains(r.stdout, "via-oidc-provider") {
		t.Errorf("call output:\n%s", r)
	}

	for round := range 2 {
		before := p.tokenRequests(t)
		var rep api.RefreshDrillReport
		o.runJSON(0, &rep, "drill", "refresh", "oidc", "--callers", "50")
		if rep.TokenRequests != 1 || rep.Succeeded != 50 || rep.Failed != 0 || !rep.GrantIntact || rep.Verdict != api.VerdictPass {
			t.Fatalf("round %d: drill report = %+v", round, rep)
		}
		// The drill's refresh and its follow-up check: one each.
		if n := p.tokenRequests(t) - before; n != 2 {
			t.Fatalf("round %d: the provider saw %d token requests, want 2", round, n)
		}
	}
	// The grant was never revoked: calls still work after the drills.
	o.mustRun("call", "oidc", "echo", "text=after-drill")
	tokens := storedTokens(t, o.StateDir)
	if !p.active(tokens[0]) {
		t.Fatal("the stored access token is not active at the provider")
	}

	var lo api.LogoutResult
	o.runJSON(0, &lo, "logout", "oidc")
	if !lo.Removed || !lo.Revoked {
		t.Errorf("logout = %+v, want tokens removed and the grant revoked", lo)
	}
	// Revoking the refresh token ends the grant: its access token dies too.
	if p.active(tokens[0]) {
		t.Errorf("the access token is still active at the provider after logout")
	}
	var as []api.AuthStatus
	o.runJSON(0, &as, "auth", "status", "oidc")
	if len(as) != 1 || as[0].SignedIn {
		t.Errorf("auth status after logout = %+v", as)
	}
	t.Logf("provider token requests in all: %d", p.tokenRequests(t))
}
