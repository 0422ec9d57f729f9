package discovery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/internal/waitfor"
)

// site is a loopback server answering fixed documents by path and
// recording every path it was asked for.
type site struct {
	srv  *httptest.Server
	mu   sync.Mutex
	docs map[string]any // path -> JSON document, or int status
	hits []string
	gate chan struct{} // when set, requests wait for it to close
}

func newSite(t *testing.T) *site {
	t.Helper()
	s := &site{docs: map[string]any{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *site) set(path string, v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docs[path] = v
}

func (s *site) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits = append(s.hits, r.URL.Path)
	v, ok := s.docs[r.URL.Path]
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	if code, isCode := v.(int); isCode {
		w.WriteHeader(code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (s *site) hitList() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.hits)
}

func (s *site) count(path string) int {
	n := 0
	for _, h := range s.hitList() {
		if h == path {
			n++
		}
	}
	return n
}

func (s *site) url(p string) string { return s.srv.URL + p }

// asMetadata is a complete, well-behaved document for issuer.
func asMetadata(issuer string) map[string]any {
	return map[string]any{
		"issuer":                                issuer,
		"authorization_endpoint":                issuer + "/authorize",
		"token_endpoint":                        issuer + "/token",
		"registration_endpoint":                 issuer + "/register",
		"code_challenge_methods_supported":      []string{"S256"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
		"scopes_supported":                      []string{"read", "offline_access"},
		"token_endpoint_auth_methods_supported": []string{"none"},
		"response_types_supported":              []string{"code"},
	}
}

// world wires a resource server at /mcp pointing at an authorization
// server on its own origin.
func world(t *testing.T) (rs, as *site) {
	rs, as = newSite(t), newSite(t)
	rs.set("/.well-known/oauth-protected-resource/mcp", map[string]any{
		"resource":              rs.url("/mcp"),
		"authorization_servers": []string{as.srv.URL},
		"scopes_supported":      []string{"read"},
	})
	as.set("/.well-known/oauth-authorization-server", asMetadata(as.srv.URL))
	return rs, as
}

func TestDiscoverChain(t *testing.T) {
	rs, as := world(t)
	d := New(nil)
	res, err := d.Discover(context.Background(), rs.url("/mcp"), nil, Overrides{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.AuthServerURL != as.srv.URL || res.Metadata.TokenEndpoint != as.url("/token") {
		t.Fatalf("result = %+v", res)
	}
	if res.ResourceIndicator != rs.url("/mcp") || res.ResourceMismatch {
		t.Fatalf("resource = %q mismatch=%v", res.ResourceIndicator, res.ResourceMismatch)
	}
	if got := strings.Join(res.Scopes, " "); got != "read offline_access" {
		t.Fatalf("scopes = %q", got)
	}
	if len(res.Attempts) != 2 || !res.Attempts[0].Used || !res.Attempts[1].Used {
		t.Fatalf("attempts = %+v", res.Attempts)
	}
	// The root document must not be fetched when the path one exists.
	if rs.count("/.well-known/oauth-protected-resource") != 0 {
		t.Fatalf("root PRM fetched: %v", rs.hitList())
	}
}

func TestDiscoverPRMOrder(t *testing.T) {
	tests := []struct {
		name     string
		server   string // path on rs
		docs     []string
		hint     bool
		wantUsed string
		wantHits []string
	}{
		{"path first", "/mcp", []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"}, false,
			"/.well-known/oauth-protected-resource/mcp", []string{"/.well-known/oauth-protected-resource/mcp"}},
		{"root fallback", "/mcp", []string{"/.well-known/oauth-protected-resource"}, false,
			"/.well-known/oauth-protected-resource", []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"}},
		{"no path", "", []string{"/.well-known/oauth-protected-resource"}, false,
			"/.well-known/oauth-protected-resource", []string{"/.well-known/oauth-protected-resource"}},
		{"challenge URL only", "/mcp", []string{"/custom/prm", "/.well-known/oauth-protected-resource/mcp"}, true,
			"/custom/prm", []string{"/custom/prm"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, as := newSite(t), newSite(t)
			as.set("/.well-known/oauth-authorization-server", asMetadata(as.srv.URL))
			for _, p := range tt.docs {
				rs.set(p, map[string]any{"resource": rs.url(tt.server), "authorization_servers": []string{as.srv.URL}})
			}
			var ch *Challenge
			if tt.hint {
				ch = &Challenge{Scheme: "Bearer", ResourceMetadata: rs.url("/custom/prm")}
			}
			res, err := New(nil).Discover(context.Background(), rs.url(tt.server), ch, Overrides{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.ResourceMetadataURL != rs.url(tt.wantUsed) {
				t.Errorf("used %s, want %s", res.ResourceMetadataURL, tt.wantUsed)
			}
			if got := rs.hitList(); !slices.Equal(got, tt.wantHits) {
				t.Errorf("hits = %v, want %v", got, tt.wantHits)
			}
		})
	}
}

func TestDiscoverASMetadataOrder(t *testing.T) {
	tests := []struct {
		name     string
		issuer   string // path of the issuer on as
		served   string
		wantHits []string
	}{
		{"rfc8414 root", "", "/.well-known/oauth-authorization-server", []string{"/.well-known/oauth-authorization-server"}},
		{"oidc root", "", "/.well-known/openid-configuration", []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"}},
		{"rfc8414 path", "/t1", "/.well-known/oauth-authorization-server/t1", []string{"/.well-known/oauth-authorization-server/t1"}},
		{"oidc inserted", "/t1", "/.well-known/openid-configuration/t1", []string{"/.well-known/oauth-authorization-server/t1", "/.well-known/openid-configuration/t1"}},
		{"oidc appended", "/t1", "/t1/.well-known/openid-configuration", []string{"/.well-known/oauth-authorization-server/t1", "/.well-known/openid-configuration/t1", "/t1/.well-known/openid-configuration"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, as := newSite(t), newSite(t)
			issuer := as.url(tt.issuer)
			rs.set("/.well-known/oauth-protected-resource", map[string]any{"resource": rs.srv.URL, "authorization_servers": []string{issuer}})
			as.set(tt.served, asMetadata(issuer))
			res, err := New(nil).Discover(context.Background(), rs.srv.URL, nil, Overrides{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.AuthServerMetadataURL != as.url(tt.served) {
				t.Errorf("metadata URL = %s", res.AuthServerMetadataURL)
			}
			if got := as.hitList(); !slices.Equal(got, tt.wantHits) {
				t.Errorf("hits = %v, want %v", got, tt.wantHits)
			}
		})
	}
}

func TestDiscoverErrors(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(rs, as *site)
		strict   bool
		wantStep string
		wantErr  error
	}{
		{"no PRM", func(rs, as *site) { rs.set("/.well-known/oauth-protected-resource/mcp", 404) }, false, StepResourceMetadata, ErrHTTPStatus},
		{"PRM not JSON", func(rs, as *site) { rs.set("/.well-known/oauth-protected-resource/mcp", "not an object") }, false, StepResourceMetadata, ErrMalformedMetadata},
		{"no authorization servers", func(rs, as *site) {
			rs.set("/.well-known/oauth-protected-resource/mcp", map[string]any{"resource": rs.url("/mcp")})
		}, false, StepAuthServer, ErrNoAuthorizationServers},
		{"http authorization server off loopback", func(rs, as *site) {
			rs.set("/.well-known/oauth-protected-resource/mcp", map[string]any{"resource": rs.url("/mcp"), "authorization_servers": []string{"http://as.example.com"}})
		}, false, StepAuthServer, ErrURLRefused},
		{"link-local authorization server", func(rs, as *site) {
			rs.set("/.well-known/oauth-protected-resource/mcp", map[string]any{"resource": rs.url("/mcp"), "authorization_servers": []string{"https://169.254.169.254"}})
		}, false, StepAuthServer, ErrURLRefused},
		{"issuer mismatch", func(rs, as *site) {
			as.set("/.well-known/oauth-authorization-server", asMetadata("https://other.example.com"))
		}, false, StepAuthServerMetadata, ErrIssuerMismatch},
		{"no AS metadata", func(rs, as *site) { as.set("/.well-known/oauth-authorization-server", 500) }, false, StepAuthServerMetadata, ErrHTTPStatus},
		{"missing token endpoint", func(rs, as *site) {
			m := asMetadata(as.srv.URL)
			delete(m, "token_endpoint")
			as.set("/.well-known/oauth-authorization-server", m)
		}, false, StepEndpoints, ErrMissingEndpoint},
		{"endpoint over plain http off loopback", func(rs, as *site) {
			m := asMetadata(as.srv.URL)
			m["token_endpoint"] = "http://as.example.com/token"
			as.set("/.well-known/oauth-authorization-server", m)
		}, false, StepEndpoints, ErrURLRefused},
		{"resource mismatch strict", func(rs, as *site) {
			rs.set("/.well-known/oauth-protected-resource/mcp", map[string]any{"resource": "https://elsewhere.example.com/mcp", "authorization_servers": []string{as.srv.URL}})
		}, true, StepResource, ErrResourceMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, as := world(t)
			tt.setup(rs, as)
			var opts []Option
			if tt.strict {
				opts = append(opts, WithStrictResource())
			}
			_, err := New(nil, opts...).Discover(context.Background(), rs.url("/mcp"), nil, Overrides{}, nil)
			var de *Error
			if !errors.As(err, &de) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if de.Step != tt.wantStep || !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v (step %s), want step %s wrapping %v", err, de.Step, tt.wantStep, tt.wantErr)
			}
			if len(de.Attempts) == 0 && tt.wantStep != StepAuthServer {
				t.Errorf("no attempts recorded")
			}
			// No default endpoint is ever guessed.
			for _, h := range append(rs.hitList(), as.hitList()...) {
				if h == "/authorize" || h == "/token" || h == "/register" {
					t.Errorf("guessed endpoint fetched: %s", h)
				}
			}
		})
	}
}

func TestDiscoverResourceMismatchWarns(t *testing.T) {
	rs, as := world(t)
	rs.set("/.well-known/oauth-protected-resource/mcp", map[string]any{"resource": "https://elsewhere.example.com/mcp", "authorization_servers": []string{as.srv.URL}})
	res, err := New(nil).Discover(context.Background(), rs.url("/mcp"), nil, Overrides{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.ResourceMismatch || len(res.Warnings) == 0 || res.ResourceIndicator != rs.url("/mcp") {
		t.Fatalf("mismatch=%v warnings=%v indicator=%s", res.ResourceMismatch, res.Warnings, res.ResourceIndicator)
	}
}

func TestResourceMatches(t *testing.T) {
	tests := []struct {
		resource, server string
		want             bool
	}{
		{"https://a.example/mcp", "https://a.example/mcp", true},
		{"https://A.example/mcp/", "https://a.example:443/mcp", true},
		{"https://a.example", "https://a.example/mcp", true},
		{"https://a.example/", "https://a.example/mcp", true},
		{"https://a.example/mc", "https://a.example/mcp", false},
		{"https://a.example/mcp", "https://b.example/mcp", false},
		{"http://a.example/mcp", "https://a.example/mcp", false},
		{"https://a.example/mcp/x", "https://a.example/mcp", false},
		{"", "https://a.example/mcp", false},
	}
	for _, tt := range tests {
		if got := resourceMatches(tt.resource, tt.server); got != tt.want {
			t.Errorf("resourceMatches(%q, %q) = %v, want %v", tt.resource, tt.server, got, tt.want)
		}
	}
}

func TestDiscoverOverrides(t *testing.T) {
	t.Run("endpoint overrides replace discovered ones", func(t *testing.T) {
		rs, as := world(t)
		ov := Overrides{AuthorizationEndpoint: as.url("/alt/authorize"), TokenEndpoint: as.url("/alt/token"), RegistrationEndpoint: as.url("/alt/register")}
		res, err := New(nil).Discover(context.Background(), rs.url("/mcp"), nil, ov, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := res.Metadata
		if m.AuthorizationEndpoint != ov.AuthorizationEndpoint || m.TokenEndpoint != ov.TokenEndpoint || m.RegistrationEndpoint != ov.RegistrationEndpoint {
			t.Fatalf("metadata = %+v", m)
		}
		if want := []string{"authorization_endpoint", "token_endpoint", "registration_endpoint"}; !slices.Equal(res.Overridden, want) {
			t.Fatalf("overridden = %v", res.Overridden)
		}
	})
	t.Run("metadata URL override fetched alongside PRM", func(t *testing.T) {
		rs, as := world(t)
		as.set("/custom/metadata", asMetadata(as.srv.URL))
		res, err := New(nil).Discover(context.Background(), rs.url("/mcp"), nil, Overrides{AuthServerMetadataURL: as.url("/custom/metadata")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.AuthServerMetadataURL != as.url("/custom/metadata") || !slices.Contains(res.Overridden, "auth_server_metadata_url") {
			t.Fatalf("result = %+v", res)
		}
		if as.count("/.well-known/oauth-authorization-server") != 0 {
			t.Fatalf("well-known metadata fetched despite override: %v", as.hitList())
		}
	})
	t.Run("no metadata anywhere: built from endpoint overrides, nothing guessed", func(t *testing.T) {
		rs, as := world(t)
		as.set("/.well-known/oauth-authorization-server", 404)
		ov := Overrides{AuthorizationEndpoint: as.url("/a"), TokenEndpoint: as.url("/t")}
		res, err := New(nil).Discover(context.Background(), rs.url("/mcp"), nil, ov, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Metadata.AuthorizationEndpoint != ov.AuthorizationEndpoint || res.Metadata.RegistrationEndpoint != "" || len(res.Warnings) == 0 {
			t.Fatalf("result = %+v", res)
		}
		for _, h := range as.hitList() {
			if h == "/authorize" || h == "/token" || h == "/register" {
				t.Fatalf("guessed %s", h)
			}
		}
	})
	t.Run("one endpoint override is not enough without metadata", func(t *testing.T) {
		rs, as := world(t)
		as.set("/.well-known/oauth-authorization-server", 404)
		_, err := New(nil).Discover(context.Background(), rs.url("/mcp"), nil, Overrides{TokenEndpoint: as.url("/t")}, nil)
		var de *Error
		if !errors.As(err, &de) || de.Step != StepAuthServerMetadata {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("invalid override refused", func(t *testing.T) {
		rs, _ := world(t)
		_, err := New(nil).Discover(context.Background(), rs.url("/mcp"), nil, Overrides{TokenEndpoint: "https://as.example.com/t?x=1"}, nil)
		var oe *OverrideError
		if !errors.As(err, &oe) || oe.Field != "token_endpoint" {
			t.Fatalf("err = %v", err)
		}
		if len(rs.hitList()) != 0 {
			t.Fatal("fetched despite an invalid override")
		}
	})
}

func TestValidateEndpointURL(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"https://as.example.com/token", true},
		{"http://127.0.0.1:8080/token", true},
		{"http://localhost/token", true},
		{"http://[::1]:9/token", true},
		{"http://as.example.com/token", false},
		{"https://as.example.com/token?a=b", false},
		{"https://as.example.com/token?", false},
		{"https://as.example.com/token#frag", false},
		{"https://user:pw@as.example.com/token", false},
		{"https://as.example.com/to ken", false},
		{" https://as.example.com/token", false},
		{"https://as.example.com/token\n", false},
		{"ftp://as.example.com/token", false},
		{"/token", false},
		{"https://169.254.169.254/token", false},
		{"https://[fe80::1]/token", false},
		{"", false},
	}
	for _, tt := range tests {
		err := ValidateEndpointURL(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateEndpointURL(%q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
	o, dropped := Overrides{TokenEndpoint: "http://x.example/t", AuthorizationEndpoint: "https://x.example/a"}.Sanitize()
	if o.TokenEndpoint != "" || o.AuthorizationEndpoint == "" || !slices.Equal(dropped, []string{"token_endpoint"}) {
		t.Errorf("Sanitize = %+v, %v", o, dropped)
	}
}

func TestSelectScopes(t *testing.T) {
	prm := &ProtectedResource{ScopesSupported: []string{"read", "write"}}
	withOffline := &ServerMetadata{ScopesSupported: []string{"read", "offline_access"}}
	without := &ServerMetadata{ScopesSupported: []string{"read"}}
	tests := []struct {
		name       string
		configured []string
		ch         *Challenge
		pr         *ProtectedResource
		md         *ServerMetadata
		want       []string
	}{
		{"configured wins untouched", []string{"x"}, &Challenge{Scope: "y"}, prm, withOffline, []string{"x"}},
		{"challenge scope, no offline_access", nil, &Challenge{Scope: "a b"}, prm, withOffline, []string{"a", "b"}},
		{"PRM scopes plus offline_access", nil, nil, prm, withOffline, []string{"read", "write", "offline_access"}},
		{"PRM scopes, AS lacks offline_access", nil, nil, prm, without, []string{"read", "write"}},
		{"nothing", nil, nil, &ProtectedResource{}, withOffline, nil},
		{"already present", nil, nil, &ProtectedResource{ScopesSupported: []string{"offline_access"}}, withOffline, []string{"offline_access"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SelectScopes(tt.configured, tt.ch, tt.pr, tt.md); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestDiscoverCache(t *testing.T) {
	prmPath := "/.well-known/oauth-protected-resource/mcp"
	t.Run("success cached for an hour", func(t *testing.T) {
		rs, _ := world(t)
		clk := &fakeClock{t: time.Unix(1000, 0)}
		d := New(nil, WithNow(clk.now))
		for range 3 {
			if _, err := d.Discover(context.Background(), rs.url("/mcp"), nil, Overrides{}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if n := rs.count(prmPath); n != 1 {
			t.Fatalf("PRM fetched %d times", n)
		}
		clk.add(59 * time.Minute)
		res, _ := d.Discover(context.Background(), rs.url("/mcp"), nil, Overrides{}, nil)
		if !res.Cached || rs.count(prmPath) != 1 {
			t.Fatal("cache not used within the hour")
		}
		clk.add(2 * time.Minute)
		res, _ = d.Discover(context.Background(), rs.url("/mcp"), nil, Overrides{}, nil)
		if res.Cached || rs.count(prmPath) != 2 {
			t.Fatal("cache used after an hour")
		}
	})
	t.Run("failure cached for 30s", func(t *testing.T) {
		rs, _ := world(t)
		rs.set(prmPath, 503)
		rs.set("/.well-known/oauth-protected-resource", 503)
		clk := &fakeClock{t: time.Unix(1000, 0)}
		d := New(nil, WithNow(clk.now))
		for range 2 {
			if _, err := d.Discover(context.Background(), rs.url("/mcp"), nil, Overrides{}, nil); err == nil {
				t.Fatal("want error")
			}
		}
		if n := rs.count(prmPath); n != 1 {
			t.Fatalf("PRM fetched %d times", n)
		}
		rs.set(prmPath, map[string]any{"resource": rs.url("/mcp"), "authorization_servers": []string{}})
		clk.add(31 * time.Second)
		_, err := d.Discover(context.Background(), rs.url("/mcp"), nil, Overrides{}, nil)
		if !errors.Is(err, ErrNoAuthorizationServers) || rs.count(prmPath) != 2 {
			t.Fatalf("after the failure TTL: err=%v hits=%d", err, rs.count(prmPath))
		}
	})
	t.Run("single flight", func(t *testing.T) {
		rs, _ := world(t)
		gate := make(chan struct{})
		rs.mu.Lock()
		rs.gate = gate
		rs.mu.Unlock()
		d := New(nil)
		const n = 20
		var wg sync.WaitGroup
		var failed atomic.Int32
		for range n {
			wg.Go(func() {
				if _, err := d.Discover(context.Background(), rs.url("/mcp"), nil, Overrides{}, nil); err != nil {
					failed.Add(1)
				}
			})
		}
		// Hold the first fetch until it has arrived; the rest join it.
		waitfor.True(t, 5*time.Second, "the metadata fetch to reach the server", func() bool { return rs.count(prmPath) > 0 })
		close(gate)
		wg.Wait()
		if failed.Load() != 0 || rs.count(prmPath) != 1 {
			t.Fatalf("failed=%d fetches=%d", failed.Load(), rs.count(prmPath))
		}
	})
	t.Run("a different resource_metadata URL invalidates", func(t *testing.T) {
		rs, as := world(t)
		rs.set("/other/prm", map[string]any{"resource": rs.url("/mcp"), "authorization_servers": []string{as.srv.URL}})
		d := New(nil)
		if _, err := d.Discover(context.Background(), rs.url("/mcp"), nil, Overrides{}, nil); err != nil {
			t.Fatal(err)
		}
		same := &Challenge{Scheme: "Bearer", ResourceMetadata: rs.url(prmPath)}
		res, err := d.Discover(context.Background(), rs.url("/mcp"), same, Overrides{}, nil)
		if err != nil || !res.Cached {
			t.Fatalf("same URL: cached=%v err=%v", res != nil && res.Cached, err)
		}
		other := &Challenge{Scheme: "Bearer", ResourceMetadata: rs.url("/other/prm")}
		res, err = d.Discover(context.Background(), rs.url("/mcp"), other, Overrides{}, nil)
		if err != nil || res.Cached || res.ResourceMetadataURL != rs.url("/other/prm") {
			t.Fatalf("other URL: %+v %v", res, err)
		}
	})
	t.Run("invalidation during a fetch is not undone by it", func(t *testing.T) {
		rs, _ := world(t)
		gate := make(chan struct{})
		rs.mu.Lock()
		rs.gate = gate
		rs.mu.Unlock()
		d := New(nil)
		done := make(chan error, 1)
		go func() {
			_, err := d.Discover(context.Background(), rs.url("/mcp"), nil, Overrides{}, nil)
			done <- err
		}()
		waitfor.True(t, 5*time.Second, "the metadata fetch to reach the server", func() bool { return rs.count(prmPath) > 0 })
		d.Invalidate(rs.url("/mcp"))
		close(gate)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		res, err := d.Discover(context.Background(), rs.url("/mcp"), nil, Overrides{}, nil)
		if err != nil || res.Cached || rs.count(prmPath) != 2 {
			t.Fatalf("stale in-flight result cached: cached=%v fetches=%d err=%v", res != nil && res.Cached, rs.count(prmPath), err)
		}
	})
	t.Run("explicit invalidate and separate keys per override set", func(t *testing.T) {
		rs, as := world(t)
		d := New(nil)
		ctx := context.Background()
		_, _ = d.Discover(ctx, rs.url("/mcp"), nil, Overrides{}, nil)
		_, _ = d.Discover(ctx, rs.url("/mcp"), nil, Overrides{TokenEndpoint: as.url("/t2")}, nil)
		if n := rs.count(prmPath); n != 2 {
			t.Fatalf("override sets share an entry: %d fetches", n)
		}
		d.Invalidate(rs.url("/mcp"))
		_, _ = d.Discover(ctx, rs.url("/mcp"), nil, Overrides{}, nil)
		if n := rs.count(prmPath); n != 3 {
			t.Fatalf("Invalidate ignored: %d fetches", n)
		}
	})
	t.Run("LRU bound", func(t *testing.T) {
		rs, as := world(t)
		for _, p := range []string{"/a", "/b"} {
			rs.set("/.well-known/oauth-protected-resource"+p, map[string]any{"resource": rs.url(p), "authorization_servers": []string{as.srv.URL}})
		}
		d := New(nil, WithCacheSize(2))
		ctx := context.Background()
		for _, p := range []string{"/mcp", "/a", "/b", "/mcp"} {
			if _, err := d.Discover(ctx, rs.url(p), nil, Overrides{}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if n := rs.count(prmPath); n != 2 {
			t.Fatalf("evicted entry served from cache: %d fetches", n)
		}
	})
}

func TestRefreshGrantWarningOncePerServer(t *testing.T) {
	rs, as := world(t)
	m := asMetadata(as.srv.URL)
	m["grant_types_supported"] = []string{"authorization_code"}
	as.set("/.well-known/oauth-authorization-server", m)
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	d := New(nil, WithLogger(logger))
	for range 3 {
		res, err := d.Discover(context.Background(), rs.url("/mcp"), nil, Overrides{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, "refresh_token") }) {
			t.Fatalf("warnings = %v", res.Warnings)
		}
		d.Invalidate(rs.url("/mcp"))
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(buf.String(), "refresh tokens"); n != 1 {
		t.Fatalf("warning logged %d times:\n%s", n, buf.String())
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestGrantTypesPresence(t *testing.T) {
	tests := []struct {
		doc  string
		lack bool
	}{
		{`{"issuer":"x"}`, false},
		{`{"issuer":"x","grant_types_supported":[]}`, true},
		{`{"issuer":"x","grant_types_supported":["authorization_code"]}`, true},
		{`{"issuer":"x","grant_types_supported":["refresh_token"]}`, false},
	}
	for _, tt := range tests {
		m, err := ParseServerMetadata([]byte(tt.doc))
		if err != nil {
			t.Fatal(err)
		}
		if m.LacksRefreshGrant() != tt.lack {
			t.Errorf("%s: LacksRefreshGrant = %v", tt.doc, !tt.lack)
		}
	}
}

func TestLint(t *testing.T) {
	full := &ServerMetadata{
		AuthorizationEndpoint: "https://a/authorize", TokenEndpoint: "https://a/token", RegistrationEndpoint: "https://a/register",
		CodeChallengeMethodsSupported: []string{"S256"}, GrantTypesSupported: []string{"authorization_code", "refresh_token"},
		ScopesSupported: []string{"offline_access"}, TokenEndpointAuthMethodsSupported: []string{"none"}, ResponseTypesSupported: []string{"code"},
	}
	level := func(fs []Finding, check string) string {
		for _, f := range fs {
			if f.Check == check {
				return f.Level
			}
		}
		return ""
	}
	for _, f := range Lint(full) {
		if f.Level != LevelOK {
			t.Errorf("complete metadata: %+v", f)
		}
	}
	tests := []struct {
		name   string
		mutate func(m *ServerMetadata)
		check  string
		level  string
		text   string
	}{
		{"no PKCE methods", func(m *ServerMetadata) { m.CodeChallengeMethodsSupported = nil }, "pkce", LevelFail, "allow_missing_pkce_methods"},
		{"plain only", func(m *ServerMetadata) { m.CodeChallengeMethodsSupported = []string{"plain"} }, "pkce", LevelFail, "S256"},
		{"no registration", func(m *ServerMetadata) { m.RegistrationEndpoint = "" }, "registration", LevelWarn, "oauth.client_id"},
		{"CIMD only", func(m *ServerMetadata) { m.RegistrationEndpoint = ""; m.ClientIDMetadataDocumentSupported = true }, "registration", LevelOK, "metadata"},
		{"no refresh grant", func(m *ServerMetadata) { m.GrantTypesSupported = []string{"authorization_code"} }, "refresh_token", LevelWarn, "sign in again"},
		{"secret only", func(m *ServerMetadata) { m.TokenEndpointAuthMethodsSupported = []string{"client_secret_basic"} }, "token_endpoint_auth", LevelWarn, "secret"},
		{"unknown auth", func(m *ServerMetadata) { m.TokenEndpointAuthMethodsSupported = []string{"tls_client_auth"} }, "token_endpoint_auth", LevelFail, "tls_client_auth"},
		{"no token endpoint", func(m *ServerMetadata) { m.TokenEndpoint = "" }, "endpoints", LevelFail, "oauth.token_endpoint"},
		{"no code response type", func(m *ServerMetadata) { m.ResponseTypesSupported = []string{"token"} }, "response_types", LevelFail, "code"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := *full
			tt.mutate(&m)
			fs := Lint(&m)
			if got := level(fs, tt.check); got != tt.level {
				t.Fatalf("%s = %s, want %s (%+v)", tt.check, got, tt.level, fs)
			}
			for _, f := range fs {
				if f.Check == tt.check && !strings.Contains(f.Message, tt.text) {
					t.Errorf("message %q lacks %q", f.Message, tt.text)
				}
			}
		})
	}
}

func TestRedirectPolicy(t *testing.T) {
	req := func(method, raw string) *http.Request {
		u, _ := url.Parse(raw)
		return &http.Request{Method: method, URL: u}
	}
	tests := []struct {
		name    string
		from    *http.Request
		to      *http.Request
		refused bool
	}{
		{"https to http off loopback", req("GET", "https://as.example.com/a"), req("GET", "http://as.example.com/b"), true},
		{"https to http on loopback", req("GET", "https://as.example.com/a"), req("GET", "http://127.0.0.1:9/b"), false},
		{"https to https elsewhere (GET)", req("GET", "https://as.example.com/a"), req("GET", "https://b.example.com/b"), false},
		{"POST cross-origin", req("POST", "https://as.example.com/token"), req("GET", "https://b.example.com/token"), true},
		{"POST same origin, explicit default port", req("POST", "https://as.example.com/token"), req("POST", "https://as.example.com:443/v2/token"), false},
		{"POST to another port", req("POST", "http://127.0.0.1:8000/token"), req("POST", "http://127.0.0.1:8001/token"), true},
		{"link-local target", req("GET", "https://as.example.com/a"), req("GET", "https://169.254.169.254/latest"), true},
		{"userinfo target", req("GET", "https://as.example.com/a"), req("GET", "https://u:p@as.example.com/b"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckRedirect(tt.to, []*http.Request{tt.from})
			if (err != nil) != tt.refused {
				t.Fatalf("err = %v, refused want %v", err, tt.refused)
			}
			if err != nil && !errors.Is(err, ErrRedirectRefused) {
				t.Fatalf("err = %v does not wrap ErrRedirectRefused", err)
			}
		})
	}
}

func TestRedirectPolicyLive(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("{}")) }))
	defer target.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/landed", http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	c := NewHTTPClient(nil, 5*time.Second)

	resp, err := c.Get(redirector.URL)
	if err != nil {
		t.Fatalf("GET cross-origin redirect refused: %v", err)
	}
	resp.Body.Close()

	_, err = c.Post(redirector.URL, "application/x-www-form-urlencoded", strings.NewReader("grant_type=x"))
	if !errors.Is(err, ErrRedirectRefused) {
		t.Fatalf("POST cross-origin redirect: err = %v", err)
	}
}
