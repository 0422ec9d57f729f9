package upstream

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// A redirect to another origin must not carry the token the transport
// chain adds (the client's own header stripping does not see it).
func TestRedirectToAnotherOriginRefused(t *testing.T) {
	var leaked atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Store(true)
		}
	}))
	defer other.Close()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/elsewhere", http.StatusFound)
	}))
	defer up.Close()
	bearer := func(_ string, next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer canary-token")
			return next.RoundTrip(r)
		})
	}
	hc, err := newHTTPClient(config.Server{Name: "x", URL: up.URL}, []Wrapper{bearer}, streamBounds{maxEvent: 1 << 20}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{http.MethodGet, http.MethodDelete, http.MethodPost} {
		req, _ := http.NewRequest(method, up.URL+"/mcp", strings.NewReader("{}"))
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: a redirect to another origin was followed", method)
		}
	}
	if leaked.Load() {
		t.Fatal("the token reached another origin")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
