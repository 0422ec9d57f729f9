package discovery

import (
	"context"
	"net/http"
	"slices"
	"testing"
)

// The 2025-03-26 discovery: only for a server whose well-known
// protected-resource URLs all answer 404; metadata at the server's origin
// when served, else the spec's default endpoints.
func TestLegacyDiscovery(t *testing.T) {
	for _, tc := range []struct {
		name       string
		setup      func(s *site)
		applies    bool
		wantAuthz  string // path of the authorization endpoint, "" for no discovery
		wantMDUsed bool
	}{
		{"metadata at the origin", func(s *site) {
			md := asMetadata(s.srv.URL)
			md["authorization_endpoint"] = s.url("/oauth/authorize")
			s.set("/.well-known/oauth-authorization-server", md)
		}, true, "/oauth/authorize", true},
		{"no metadata: default endpoints", func(*site) {}, true, "/authorize", false},
		{"resource metadata broken, not absent", func(s *site) {
			s.set("/.well-known/oauth-protected-resource/mcp", http.StatusInternalServerError)
		}, false, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSite(t)
			tc.setup(s)
			d := New(nil)
			ctx := context.Background()
			_, err := d.Discover(ctx, s.url("/mcp"), nil, Overrides{}, nil)
			if err == nil {
				t.Fatal("Discover succeeded without resource metadata")
			}
			if got := legacyApplies(err); got != tc.applies {
				t.Fatalf("legacyApplies = %v, want %v (%v)", got, tc.applies, err)
			}
			if !tc.applies {
				return
			}
			res, err := d.discoverLegacy(ctx, s.url("/mcp"), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			md := res.Metadata
			if md.AuthorizationEndpoint != s.url(tc.wantAuthz) || md.TokenEndpoint != s.url("/token") {
				t.Errorf("endpoints = %s %s", md.AuthorizationEndpoint, md.TokenEndpoint)
			}
			if (res.AuthServerMetadataURL != "") != tc.wantMDUsed {
				t.Errorf("metadata URL = %q", res.AuthServerMetadataURL)
			}
			if !slices.Contains(md.CodeChallengeMethodsSupported, "S256") {
				t.Errorf("PKCE methods = %v", md.CodeChallengeMethodsSupported)
			}
			if res.ResourceIndicator != s.url("/mcp") || len(res.Warnings) == 0 {
				t.Errorf("resource %q, warnings %v", res.ResourceIndicator, res.Warnings)
			}
			// Cached: no second fetch.
			before := s.count("/.well-known/oauth-authorization-server")
			if _, err := d.discoverLegacy(ctx, s.url("/mcp"), nil, nil); err != nil {
				t.Fatal(err)
			}
			if s.count("/.well-known/oauth-authorization-server") != before {
				t.Error("the legacy discovery was not cached")
			}
		})
	}
}
