package oauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/authserver"
	"github.com/mcpx-dev/mcpx/proxyd/oauth/discovery"
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
		resp, err := hc.Get(up.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	ctx := context.Background()
	if _, ok, _ := r.c.PendingStepUp(ctx, r.key); ok {
		t.Fatal("step-up pending before any 403")
	}
	if get() != http.StatusForbidden {
		t.Fatal("want 403")
	}
	for range MaxStepUpAttempts {
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
