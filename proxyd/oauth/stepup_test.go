package oauth

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/authserver"
	"github.com/mcpx-dev/mcpx/internal/discovery"
)

func TestStepUpThroughTransport(t *testing.T) {
	r := newRig(t, rigOpts{})
	r.login(t, false)
	var allowed atomic.Bool
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !allowed.Load() {
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="write", resource_metadata="http://x/prm"`)
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer up.Close()
	hc := r.httpClient()
	get := func() int {
		return post(t, hc, up.URL, "tools/list")
	}
	ctx := context.Background()
	if _, ok, _ := r.c.PendingStepUp(ctx, r.key); ok {
		t.Fatal("step-up pending before any 403")
	}
	if get() != http.StatusForbidden {
		t.Fatal("want 403")
	}
	// The first sign-in counts: MaxStepUpAttempts-1 step-ups remain.
	for range MaxStepUpAttempts - 1 {
		scopes, ok, err := r.c.PendingStepUp(ctx, r.key)
		if err != nil || !ok || !slices.Equal(scopes, []string{"read", "write"}) {
			t.Fatalf("step-up = %v %v %v", scopes, ok, err)
		}
	}
	if _, _, err := r.c.PendingStepUp(ctx, r.key); !errors.Is(err, ErrStepUpLimit) {
		t.Fatalf("after %d attempts: %v", MaxStepUpAttempts, err)
	}
	allowed.Store(true)
	if get() != http.StatusOK {
		t.Fatal("want 200")
	}
	if _, ok, _ := r.c.PendingStepUp(ctx, r.key); ok {
		t.Fatal("step-up still pending after a successful call")
	}
}

func TestTokenEndpointFrom(t *testing.T) {
	lr := newLoginRig(t, authserver.Options{})
	f := TokenEndpointFrom(discovery.New(nil), lr.resource, discovery.Overrides{})
	got, err := f(context.Background())
	if err != nil || got != lr.as.URL()+"/token" {
		t.Fatalf("got %q %v", got, err)
	}
	f = TokenEndpointFrom(discovery.New(nil), lr.resource, discovery.Overrides{TokenEndpoint: lr.as.URL() + "/other"})
	if got, _ := f(context.Background()); got != lr.as.URL()+"/other" {
		t.Fatalf("override ignored: %q", got)
	}
}

// A server that lets initialize through but refuses everything else for
// the same scope must still meet the step-up limit; a challenge for a new
// scope starts a new budget, and a sign-out resets it.
func TestStepUpLimitSurvivesInterleavedSuccess(t *testing.T) {
	r := newRig(t, rigOpts{})
	r.login(t, false)
	var scope atomic.Value
	scope.Store("admin")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/init" || req.URL.Path == "/ok" {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="`+scope.Load().(string)+`"`)
		w.WriteHeader(http.StatusForbidden)
	}))
	defer up.Close()
	hc := r.httpClient()
	get := func(path string) {
		t.Helper()
		method := "tools/list"
		if path == "/init" {
			method = "initialize"
		}
		post(t, hc, up.URL+path, method)
	}
	ctx := context.Background()
	get("/call")
	for i := range MaxStepUpAttempts - 1 {
		if _, ok, err := r.c.PendingStepUp(ctx, r.key); err != nil || !ok {
			t.Fatalf("step-up %d: ok=%v err=%v", i+1, ok, err)
		}
		get("/init") // the reconnect's initialize succeeds
		// A background reconnect's initialize, answered between the
		// refusal and the next sign-in, shows nothing either.
		get("/call")
		get("/init")
	}
	if _, _, err := r.c.PendingStepUp(ctx, r.key); !errors.Is(err, ErrStepUpLimit) {
		t.Fatalf("want the step-up limit, got %v", err)
	}
	// A sign-in after a step-up that worked is ordinary and starts a
	// new budget for a later refusal.
	get("/ok")
	if _, ok, _ := r.c.PendingStepUp(ctx, r.key); ok {
		t.Fatal("step-up pending right after a successful request")
	}
	get("/call")
	if _, ok, err := r.c.PendingStepUp(ctx, r.key); err != nil || !ok {
		t.Fatalf("after a worked step-up: ok=%v err=%v, want a fresh budget", ok, err)
	}
	scope.Store("admin write")
	get("/call")
	if _, ok, err := r.c.PendingStepUp(ctx, r.key); err != nil || !ok {
		t.Fatalf("a new scope must start a new budget: ok=%v err=%v", ok, err)
	}
	if err := r.c.Logout(ctx, r.key); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := r.c.PendingStepUp(ctx, r.key); ok {
		t.Fatal("step-up pending after sign-out")
	}
}

// post sends a JSON-RPC request for method and returns the status.
func post(t *testing.T, hc *http.Client, url, method string) int {
	t.Helper()
	resp, err := hc.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"`+method+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestConfirmsScope(t *testing.T) {
	req := func(verb, body, header string) *http.Request {
		r := httptest.NewRequest(verb, "http://127.0.0.1/mcp", nil)
		if body != "" {
			r = httptest.NewRequest(verb, "http://127.0.0.1/mcp", strings.NewReader(body))
			r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
		}
		if header != "" {
			r.Header.Set("Mcp-Method", header)
		}
		return r
	}
	for _, tc := range []struct {
		name string
		req  *http.Request
		want bool
	}{
		{"tools/list", req("POST", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, ""), true},
		{"tools/call by header", req("POST", `{}`, "tools/call"), true},
		{"initialize", req("POST", `{"jsonrpc":"2.0","id":1,"method":"initialize"}`, ""), false},
		{"notification", req("POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, ""), false},
		{"answer to the server", req("POST", `{"jsonrpc":"2.0","id":7,"result":{}}`, ""), false},
		{"batch", req("POST", `[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, ""), false},
		{"not JSON", req("POST", `tools/list`, ""), false},
		{"stream", req("GET", "", ""), false},
		{"session end", req("DELETE", "", ""), false},
		{"body not replayable", httptest.NewRequest("POST", "http://127.0.0.1/mcp", strings.NewReader(`{"method":"tools/list"}`)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := confirmsScope(tc.req); got != tc.want {
				t.Fatalf("confirmsScope = %v, want %v", got, tc.want)
			}
		})
	}
}
