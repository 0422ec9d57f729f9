package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/authserver"
	"github.com/mcpx-dev/mcpx/internal/discovery"
)

// loginRig is a protected MCP-like resource with RFC 9728 metadata
// pointing at a fixture authorization server.
type loginRig struct {
	as       *authserver.Server
	rs       *httptest.Server
	c        *Coordinator
	store    *Store
	key      string
	resource string
	prm      map[string]any
}

func newLoginRig(t *testing.T, opts authserver.Options) *loginRig {
	t.Helper()
	as, err := authserver.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = as.Close() })
	lr := &loginRig{as: as}
	lr.rs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-protected-resource/mcp":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(lr.prm)
		case "/mcp":
			h := r.Header.Get("Authorization")
			if !strings.HasPrefix(h, "Bearer ") || !as.Validate(strings.TrimPrefix(h, "Bearer ")) {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			_, _ = w.Write([]byte("ok"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(lr.rs.Close)
	lr.resource = lr.rs.URL + "/mcp"
	lr.prm = map[string]any{"resource": lr.resource, "authorization_servers": []string{as.URL()}, "scopes_supported": []string{"read"}}
	lr.store = NewStore(openDB(t))
	lr.c = NewCoordinator(lr.store, CoordinatorOptions{})
	lr.key = ServerKey("alpha", lr.resource)
	lr.c.Sync(map[string]GrantSource{lr.key: {Server: "alpha", Resource: lr.resource,
		TokenEndpoint: func(context.Context) (string, error) { return as.URL() + "/token", nil }}})
	return lr
}

func (lr *loginRig) discover(t *testing.T) *discovery.Result {
	t.Helper()
	res, err := discovery.New(nil).Discover(context.Background(), lr.resource, nil, discovery.Overrides{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// browser follows the authorization URL to the callback, as a user's
// browser would, and records the page it ends on.
type browser struct {
	status int
	page   string
	urls   []string
}

func (b *browser) open(authURL string) error {
	b.urls = append(b.urls, authURL)
	resp, err := http.Get(authURL)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	b.status, b.page = resp.StatusCode, string(body)
	return nil
}

// forge answers the callback directly with the given query edits.
func forge(edit func(q url.Values)) func(string) error {
	return func(authURL string) error {
		u, _ := url.Parse(authURL)
		aq := u.Query()
		cbURL, _ := url.Parse(aq.Get("redirect_uri"))
		q := url.Values{"state": {aq.Get("state")}, "code": {"forged-code"}}
		edit(q)
		cbURL.RawQuery = q.Encode()
		resp, err := http.Get(cbURL.String())
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
}

func TestLoginFlow(t *testing.T) {
	lr := newLoginRig(t, authserver.Options{})
	ctx := context.Background()
	b := &browser{}
	res, err := lr.c.Login(ctx, LoginRequest{Key: lr.key, Server: "alpha", Discovery: lr.discover(t), OpenURL: b.open})
	if err != nil {
		t.Fatal(err)
	}
	if b.status != http.StatusOK || !strings.Contains(b.page, "Signed in") {
		t.Fatalf("browser page %d %q", b.status, b.page)
	}
	if res.Generation != 1 || !res.RefreshToken || !res.NewRegistration || res.ClientSource != "registered" ||
		!slices.Equal(res.Scopes, []string{"read", "offline_access"}) || res.Expiry.IsZero() {
		t.Fatalf("result = %+v", res)
	}
	au, _ := url.Parse(b.urls[0])
	q := au.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("resource") != lr.resource || q.Get("state") == "" {
		t.Fatalf("authorization request = %v", q)
	}
	for _, r := range lr.as.TokenRequestLog() {
		if r.Resource != lr.resource || r.ClientID != res.ClientID {
			t.Fatalf("token request = %+v", r)
		}
	}
	client, err := lr.store.Client(ctx, lr.key)
	if err != nil || !client.Registered || client.RedirectURI != q.Get("redirect_uri") {
		t.Fatalf("stored client = %+v %v", client, err)
	}
	hc := &http.Client{Transport: NewBearerTransport(nil, lr.c, lr.key)}
	resp, err := hc.Get(lr.resource)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("call: %v %v", resp, err)
	}
	resp.Body.Close()

	// Signing in again reuses the registration and its redirect URI.
	b2 := &browser{}
	res2, err := lr.c.Login(ctx, LoginRequest{Key: lr.key, Server: "alpha", Discovery: lr.discover(t), OpenURL: b2.open})
	if err != nil {
		t.Fatal(err)
	}
	au2, _ := url.Parse(b2.urls[0])
	if res2.Generation != 2 || res2.NewRegistration || res2.ClientID != res.ClientID || au2.Query().Get("redirect_uri") != q.Get("redirect_uri") {
		t.Fatalf("second login = %+v redirect %s", res2, au2.Query().Get("redirect_uri"))
	}
	if lr.as.Stats().Registrations != 1 {
		t.Fatalf("registrations = %d", lr.as.Stats().Registrations)
	}
	if st := lr.c.Status(lr.key); !st.SignedIn || !st.RefreshToken {
		t.Fatalf("status = %+v", st)
	}
}

func TestLoginRefusals(t *testing.T) {
	tests := []struct {
		name    string
		opts    authserver.Options
		mutate  func(lr *loginRig, req *LoginRequest)
		open    func(string) error
		wantErr error
		wantMsg string
	}{
		{"state mismatch", authserver.Options{}, nil, forge(func(q url.Values) { q.Set("state", "other") }), ErrStateMismatch, ""},
		{"iss mismatch", authserver.Options{}, nil, forge(func(q url.Values) { q.Set("iss", "https://evil.example") }), ErrIssuerMismatch, ""},
		{"iss missing though advertised", authserver.Options{}, nil, forge(func(url.Values) {}), ErrIssuerMismatch, ""},
		{"error from the server", authserver.Options{}, func(lr *loginRig, req *LoginRequest) { req.Scopes = []string{"admin"} }, nil, nil, "invalid_scope"},
		{"PKCE methods absent", authserver.Options{OmitPKCEMethods: true}, nil, nil, ErrPKCEUnsupported, "allow_missing_pkce_methods"},
		{"no registration endpoint", authserver.Options{DisableRegistration: true}, nil, nil, ErrNoClientAvailable, "oauth.client_id"},
		{"resource mismatch", authserver.Options{}, func(lr *loginRig, req *LoginRequest) {
			lr.prm["resource"] = "https://elsewhere.example/mcp"
			req.Discovery, _ = discovery.New(nil).Discover(context.Background(), lr.resource, nil, discovery.Overrides{}, nil)
		}, nil, ErrResourceMismatch, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lr := newLoginRig(t, tt.opts)
			b := &browser{}
			req := LoginRequest{Key: lr.key, Server: "alpha", Discovery: lr.discover(t), OpenURL: b.open}
			if tt.open != nil {
				req.OpenURL = tt.open
			}
			if tt.mutate != nil {
				tt.mutate(lr, &req)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := lr.c.Login(ctx, req)
			if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("err = %v, want %v / %q", err, tt.wantErr, tt.wantMsg)
			}
			if _, terr := lr.store.Token(context.Background(), lr.key); !errors.Is(terr, ErrNoToken) {
				t.Fatal("a token was stored")
			}
		})
	}
}

func TestLoginAllowMissingPKCEMethods(t *testing.T) {
	lr := newLoginRig(t, authserver.Options{OmitPKCEMethods: true})
	b := &browser{}
	if _, err := lr.c.Login(context.Background(), LoginRequest{Key: lr.key, Server: "alpha", Discovery: lr.discover(t), OpenURL: b.open, AllowMissingPKCEMethods: true}); err != nil {
		t.Fatal(err)
	}
}

func TestLoginConfiguredClient(t *testing.T) {
	lr := newLoginRig(t, authserver.Options{DisableRegistration: true})
	lr.as.AddClient("cfg-client", "cfg-secret", "http://127.0.0.1/callback")
	b := &browser{}
	res, err := lr.c.Login(context.Background(), LoginRequest{Key: lr.key, Server: "alpha", Discovery: lr.discover(t), OpenURL: b.open,
		Configured: &Client{ClientID: "cfg-client", ClientSecret: "cfg-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ClientSource != "configured" || res.ClientID != "cfg-client" {
		t.Fatalf("result = %+v", res)
	}
	if _, err := lr.store.Client(context.Background(), lr.key); !errors.Is(err, ErrNoClient) {
		t.Fatal("a configured client was written to the store")
	}
}

func TestLoginClientMetadataDocument(t *testing.T) {
	lr := newLoginRig(t, authserver.Options{})
	const cimd = "https://app.example.com/mcpx/client.json"
	lr.as.AddClient(cimd, "", "http://127.0.0.1/callback")
	d := lr.discover(t)
	d.Metadata.ClientIDMetadataDocumentSupported = true
	b := &browser{}
	res, err := lr.c.Login(context.Background(), LoginRequest{Key: lr.key, Server: "alpha", Discovery: d, OpenURL: b.open, ClientMetadataURL: cimd})
	if err != nil {
		t.Fatal(err)
	}
	if res.ClientSource != "metadata_document" || res.ClientID != cimd || lr.as.Stats().Registrations != 0 {
		t.Fatalf("result = %+v", res)
	}
}

func TestLoginExchangeInvalidClientClearsRegistration(t *testing.T) {
	lr := newLoginRig(t, authserver.Options{})
	lr.as.Fail(authserver.FailInvalidClient, 1)
	b := &browser{}
	_, err := lr.c.Login(context.Background(), LoginRequest{Key: lr.key, Server: "alpha", Discovery: lr.discover(t), OpenURL: b.open})
	var re *RefreshError
	if !errors.As(err, &re) || re.Class != OutcomeInvalidClient || !strings.Contains(re.Msg, "sign in again") {
		t.Fatalf("err = %v", err)
	}
	if _, err := lr.store.Client(context.Background(), lr.key); !errors.Is(err, ErrNoClient) {
		t.Fatal("rejected registration kept")
	}
	// The next sign-in registers anew and succeeds.
	if _, err := lr.c.Login(context.Background(), LoginRequest{Key: lr.key, Server: "alpha", Discovery: lr.discover(t), OpenURL: b.open}); err != nil {
		t.Fatal(err)
	}
	if lr.as.Stats().Registrations != 2 {
		t.Fatalf("registrations = %d", lr.as.Stats().Registrations)
	}
}

func TestStepUpScopes(t *testing.T) {
	for _, tc := range []struct {
		granted, challenged, want []string
	}{
		{[]string{"read"}, []string{"write", "read"}, []string{"read", "write"}},
		{nil, []string{"admin"}, []string{"admin"}},
		{[]string{"read"}, nil, []string{"read"}},
	} {
		if got := StepUpScopes(tc.granted, tc.challenged); !slices.Equal(got, tc.want) {
			t.Errorf("StepUpScopes(%v, %v) = %v, want %v", tc.granted, tc.challenged, got, tc.want)
		}
	}
}

func TestCheckPKCE(t *testing.T) {
	tests := []struct {
		methods []string
		allow   bool
		ok      bool
	}{
		{[]string{"S256"}, false, true},
		{[]string{"plain", "S256"}, false, true},
		{nil, false, false},
		{nil, true, true},
		{[]string{"plain"}, true, false},
	}
	for _, tt := range tests {
		err := CheckPKCE(&discovery.ServerMetadata{CodeChallengeMethodsSupported: tt.methods}, tt.allow)
		if (err == nil) != tt.ok {
			t.Errorf("CheckPKCE(%v, %v) = %v", tt.methods, tt.allow, err)
		}
	}
}

func TestCallbackPageEscapesServerText(t *testing.T) {
	cb, err := ListenCallback(CallbackOptions{Server: "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	cb.SetExpected("st", "", false)
	resp, err := http.Get(cb.RedirectURI() + "?state=st&error=access_denied&error_description=" + url.QueryEscape("<script>x</script>\x1b[31m"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), "<script>") || strings.Contains(string(body), "\x1b") || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("page %d %q", resp.StatusCode, body)
	}
	_, err = cb.Wait(context.Background())
	var ce *CallbackError
	if !errors.As(err, &ce) || ce.Code != "access_denied" || strings.Contains(err.Error(), "\x1b") {
		t.Fatalf("err = %v", err)
	}
}

func TestRevoke(t *testing.T) {
	lr := newLoginRig(t, authserver.Options{})
	b := &browser{}
	if _, err := lr.c.Login(context.Background(), LoginRequest{Key: lr.key, Server: "alpha", Discovery: lr.discover(t), OpenURL: b.open}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tok, _ := lr.store.Token(ctx, lr.key)
	client, _ := lr.store.Client(ctx, lr.key)
	if err := Revoke(ctx, nil, lr.as.URL()+"/revoke", client, tok.RefreshToken, "refresh_token"); err != nil {
		t.Fatal(err)
	}
	if !lr.as.GrantRevoked(tok.RefreshToken) || lr.as.Validate(tok.AccessToken) {
		t.Fatal("grant not revoked")
	}
	if err := lr.c.Logout(ctx, lr.key); err != nil {
		t.Fatal(err)
	}
	if st := lr.c.Status(lr.key); st.SignedIn {
		t.Fatalf("status after logout = %+v", st)
	}
	if err := Revoke(ctx, nil, "", client, "x", ""); err == nil {
		t.Fatal("revoked without an endpoint")
	}
}
