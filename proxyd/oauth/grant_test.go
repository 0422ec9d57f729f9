package oauth

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// A token endpoint that records each request's form and Basic user.
type tokenEndpoint struct {
	mu    sync.Mutex
	forms []map[string]string
	users []string
}

func (te *tokenEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	f := map[string]string{}
	for k := range r.PostForm {
		f[k] = r.PostForm.Get(k)
	}
	user, _, _ := r.BasicAuth()
	te.mu.Lock()
	te.forms, te.users = append(te.forms, f), append(te.users, user)
	te.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "at-" + f["grant_type"], "token_type": "Bearer", "expires_in": 60})
}

func TestMachineGrants(t *testing.T) {
	te := &tokenEndpoint{}
	srv := httptest.NewServer(te)
	defer srv.Close()
	dir := t.TempDir()
	wif := filepath.Join(dir, "token")
	t.Setenv("CC_SECRET", "s3cret")
	tr := func(c *Client) tokenRequest {
		return tokenRequest{Endpoint: srv.URL, Issuer: "https://as.example", Client: c, Resource: "https://mcp.example/mcp", HTTP: srv.Client()}
	}
	ctx := context.Background()

	// Client credentials: the secret read from its reference, sent with
	// Basic authentication, the resource and the scopes in the form.
	cc, err := (&Client{ClientID: "ci", ClientSecret: "${env:CC_SECRET}"}).resolve()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&MachineGrant{Kind: GrantClientCredentials, Scopes: []string{"read"}}).obtain(ctx, tr(cc)); err != nil {
		t.Fatal(err)
	}
	// Workload identity: the token file is read again at each exchange.
	for _, jwt := range []string{"eyJ.first", "eyJ.second"} {
		if err := os.WriteFile(wif, []byte(jwt+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := (&MachineGrant{Kind: GrantJWTBearer, Assertion: "${file:" + wif + "}"}).obtain(ctx, tr(&Client{})); err != nil {
			t.Fatal(err)
		}
	}
	te.mu.Lock()
	defer te.mu.Unlock()
	if len(te.forms) != 3 {
		t.Fatalf("%d token requests, want 3", len(te.forms))
	}
	if f := te.forms[0]; f["grant_type"] != "client_credentials" || f["scope"] != "read" || f["resource"] != "https://mcp.example/mcp" || te.users[0] != "ci" || f["client_secret"] != "" {
		t.Errorf("client credentials request: form %v, basic user %q", f, te.users[0])
	}
	for i, want := range []string{"eyJ.first", "eyJ.second"} {
		if f := te.forms[i+1]; f["grant_type"] != jwtBearerGrantType || f["assertion"] != want {
			t.Errorf("exchange %d: form %v, want assertion %s", i, f, want)
		}
	}
	// A missing identity token names its reference, not a value.
	_, err = (&MachineGrant{Kind: GrantJWTBearer, Assertion: "${file:" + filepath.Join(dir, "absent") + "}"}).obtain(ctx, tr(&Client{}))
	if err == nil {
		t.Error("an absent identity token file did not fail the exchange")
	}
}
