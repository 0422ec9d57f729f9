package e2e

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/fixtures/oidcprovider"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// TestOIDCProviderMachineGrant signs in the way a CI job does, against
// node-oidc-provider: the client_credentials grant, the client
// authenticated with private_key_jwt (its key read from a file), the
// tokens DPoP-bound (the token endpoint demands its nonce), and the MCP
// server accepting only DPoP-bound tokens with a valid proof. Then the
// refresh drill, checked at the provider: one token issued per expiry.
// Canaries: no private key, proof, access token or DPoP key in any output,
// log, activity record or metric, and the client's key nowhere in the
// state database.
func TestOIDCProviderMachineGrant(t *testing.T) {
	peers := peersDir(t)
	if m := oidcprovider.Missing(peers); m != "" {
		if os.Getenv("MCPX_REQUIRE_PEERS") == "1" {
			t.Fatalf("%s missing (run 'make peers')", m)
		}
		t.Skipf("%s missing", m)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	keyFile := filepath.Join(t.TempDir(), "client-key.pem")
	if err := os.WriteFile(keyFile, []byte(keyPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	jwks, err := json.Marshal(map[string]any{"keys": []jose.JSONWebKey{{Key: &key.PublicKey, Algorithm: "ES256", Use: "sig", KeyID: "ci"}}})
	if err != nil {
		t.Fatal(err)
	}
	rsID, rsSecret := "mcp-resource-server", "rs-"+randHex(t, 16)
	prov, err := oidcprovider.Start(oidcprovider.Options{PeersDir: peers, RSClientID: rsID, RSClientSecret: rsSecret,
		MachineClientID: "mcpx-ci", MachineClientJWKS: string(jwks), DPoPNonce: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = prov.Close()
		if t.Failed() {
			t.Logf("oidc-provider stderr:\n%s", prov.Stderr())
		}
	})
	p := &oidcProvider{Provider: prov, issuer: prov.Issuer, rsID: rsID, rsSecret: rsSecret}
	var md struct {
		Introspection string `json:"introspection_endpoint"`
	}
	getJSON(t, p.issuer+"/.well-known/oauth-authorization-server", &md)
	p.introspectEndpoint = md.Introspection

	rs := &dpopResourceServer{p: p, seen: map[string]bool{}}
	mcp, err := mcpserver.Start(mcpserver.Options{
		Era:                  mcpserver.EraBoth,
		ValidateRequest:      rs.authorize,
		AuthorizationServers: []string{p.issuer},
		Scopes:               []string{"read"},
	})
	if err != nil {
		t.Fatalf("starting the protected MCP fixture: %v", err)
	}
	t.Cleanup(func() { _ = mcp.Close() })

	o := newOAuthEnv(t)
	o.writeConfig(oauthConfig("ci", mcp.URL(), fmt.Sprintf(
		"    oauth:\n      grant: client_credentials\n      client_id: mcpx-ci\n      private_key: \"${file:%s}\"\n      dpop: true\n", keyFile)))
	o.up()
	var lr api.LoginResult
	o.runJSON(0, &lr, "login", "ci", "--timeout", "30s")
	if lr.ClientID != "mcpx-ci" || lr.Connection == nil || lr.Connection.State != api.StateReady || lr.RefreshToken {
		t.Fatalf("login = %+v (connection %+v), want the configured client, no refresh token, the server ready", lr, lr.Connection)
	}
	if issued, _ := prov.TokensIssued(); issued != 1 {
		t.Errorf("the provider issued %d tokens for the sign-in, want 1", issued)
	}
	r := o.mustRun("call", "ci", "echo", "text=via-client-credentials")
	if !strings.Contains(r.stdout, "via-client-credentials") {
		t.Errorf("call output:\n%s", r)
	}
	var as []api.AuthStatus
	o.runJSON(0, &as, "auth", "status", "ci")
	if len(as) != 1 || as[0].Grant != "client_credentials" || as[0].Binding != "DPoP" || as[0].Issuer != p.issuer || as[0].NextProactive == nil {
		t.Fatalf("auth status = %+v, want client_credentials, DPoP, issuer %s and a next token request", as, p.issuer)
	}

	for round := range 2 {
		before, _ := prov.TokensIssued()
		var rep api.RefreshDrillReport
		o.runJSON(0, &rep, "drill", "refresh", "ci", "--callers", "50")
		if rep.TokenRequests != 1 || rep.Succeeded != 50 || rep.Failed != 0 || !rep.GrantIntact || rep.Verdict != api.VerdictPass {
			t.Fatalf("round %d: drill report = %+v", round, rep)
		}
		// The drill's new token and its follow-up check: one per expiry.
		if after, _ := prov.TokensIssued(); after-before != 2 {
			t.Fatalf("round %d: the provider issued %d tokens, want 2 (one per expiry)", round, after-before)
		}
	}
	o.mustRun("call", "ci", "echo", "text=after-drill")
	if n := rs.count(); n < 50 {
		t.Errorf("the MCP server accepted %d DPoP-bound requests, want every call's", n)
	}
	if bad := rs.rejected(); bad != "" {
		t.Errorf("the MCP server refused a request: %s", bad)
	}

	// Canaries.
	activity := o.mustRun("activity", "-o", "json").stdout
	metrics := o.metrics()
	o.mustRun("status", "-o", "json")
	o.mustRun("auth", "status")
	log := o.proxydLog()
	secrets := map[string]string{"the client's private key": keyPEM}
	for _, line := range strings.Split(keyPEM, "\n") {
		if len(line) > 40 {
			secrets["a line of the client's private key"] = line
		}
	}
	access, dpopKey := storedGrant(t, o.StateDir)
	secrets["the access token"], secrets["the DPoP key"] = access, dpopKey
	for i, proof := range rs.proofs() {
		secrets[fmt.Sprintf("DPoP proof #%d", i)] = proof
	}
	where := map[string]string{"proxyd.log": log, "activity": activity, "metrics": metrics}
	for i, out := range o.outputs {
		where[fmt.Sprintf("CLI output #%d", i)] = out
	}
	for what, s := range secrets {
		for name, text := range where {
			if strings.Contains(text, s) || strings.Contains(text, url.QueryEscape(s)) {
				t.Errorf("%s appears in %s", what, name)
			}
		}
	}
	db, err := os.ReadFile(filepath.Join(o.StateDir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(db), secrets["a line of the client's private key"]) {
		t.Error("the client's private key is in the state database")
	}
	t.Logf("checked %d secrets against %d outputs; provider: %d token requests", len(secrets), len(where), p.tokenRequests(t))
}

// storedGrant reads the access token and the DPoP key of the one stored
// grant.
func storedGrant(t *testing.T, stateDir string) (access, dpopKey string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(stateDir, "state.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(`SELECT access_token, dpop_key FROM oauth_tokens`).Scan(&access, &dpopKey); err != nil {
		t.Fatalf("reading the grant: %v", err)
	}
	if access == "" || dpopKey == "" {
		t.Fatalf("stored grant has access token %d chars, DPoP key %d chars", len(access), len(dpopKey))
	}
	return access, dpopKey
}

// dpopResourceServer accepts a request only with a DPoP-bound token that
// the provider says is active and a proof that verifies (RFC 9449 §4.3,
// §7): signed by the key the token is bound to, for this method and URL,
// with the token's hash, never replayed.
type dpopResourceServer struct {
	p *oidcProvider

	mu     sync.Mutex
	seen   map[string]bool // jti
	n      int
	all    []string
	refuse string
}

func (rs *dpopResourceServer) authorize(r *http.Request) bool {
	err := rs.check(r)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if err != nil {
		if rs.refuse == "" && r.Header.Get("Authorization") != "" {
			rs.refuse = err.Error()
		}
		return false
	}
	rs.n++
	return true
}

func (rs *dpopResourceServer) check(r *http.Request) error {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "DPoP") || token == "" {
		return fmt.Errorf("scheme %q, want DPoP", scheme)
	}
	proof := r.Header.Get("DPoP")
	rs.mu.Lock()
	rs.all = append(rs.all, proof)
	rs.mu.Unlock()
	jws, err := jose.ParseSignedCompact(proof, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil || len(jws.Signatures) != 1 {
		return fmt.Errorf("proof does not parse: %v", err)
	}
	h := jws.Signatures[0].Header
	if h.ExtraHeaders["typ"] != "dpop+jwt" || h.JSONWebKey == nil || !h.JSONWebKey.IsPublic() {
		return fmt.Errorf("proof header typ %v, jwk %v", h.ExtraHeaders["typ"], h.JSONWebKey != nil)
	}
	payload, err := jws.Verify(h.JSONWebKey)
	if err != nil {
		return fmt.Errorf("proof signature: %v", err)
	}
	var c struct {
		JTI string `json:"jti"`
		HTM string `json:"htm"`
		HTU string `json:"htu"`
		IAT int64  `json:"iat"`
		ATH string `json:"ath"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(token))
	switch {
	case c.HTM != r.Method:
		return fmt.Errorf("htm %s, want %s", c.HTM, r.Method)
	case c.HTU != "http://"+r.Host+r.URL.Path:
		return fmt.Errorf("htu %s, want %s", c.HTU, "http://"+r.Host+r.URL.Path)
	case c.ATH != base64.RawURLEncoding.EncodeToString(sum[:]):
		return fmt.Errorf("ath does not match the token")
	case time.Since(time.Unix(c.IAT, 0)).Abs() > time.Minute:
		return fmt.Errorf("iat %d out of window", c.IAT)
	}
	tp, err := h.JSONWebKey.Thumbprint(crypto.SHA256)
	if err != nil {
		return err
	}
	active, jkt := rs.p.introspect(token)
	if !active || jkt != base64.RawURLEncoding.EncodeToString(tp) {
		return fmt.Errorf("token active %v, bound to %q, proof key %q", active, jkt, base64.RawURLEncoding.EncodeToString(tp))
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.seen[c.JTI] {
		return fmt.Errorf("proof replayed (jti %s)", c.JTI)
	}
	rs.seen[c.JTI] = true
	return nil
}

func (rs *dpopResourceServer) count() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.n
}

func (rs *dpopResourceServer) rejected() string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.refuse
}

func (rs *dpopResourceServer) proofs() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]string(nil), rs.all...)
}

// introspect asks the provider about a token (RFC 7662): whether it is
// active and the thumbprint of the key it is bound to (cnf.jkt).
func (p *oidcProvider) introspect(token string) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.introspectEndpoint,
		strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		return false, ""
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(p.rsID), url.QueryEscape(p.rsSecret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, ""
	}
	defer resp.Body.Close()
	var v struct {
		Active bool `json:"active"`
		Cnf    struct {
			JKT string `json:"jkt"`
		} `json:"cnf"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&v) != nil {
		return false, ""
	}
	return v.Active, v.Cnf.JKT
}
