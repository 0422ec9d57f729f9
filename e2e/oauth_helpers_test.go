package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/authserver"
	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// authFixture is `mcpx-fixtures authserver --mcp ...` run as a child: an
// authorization server and an MCP server it protects.
type authFixture struct {
	AS, MCP string // base URL of the authorization server, MCP endpoint URL
}

// startAuthFixture runs `mcpx-fixtures authserver --mcp ARGS` and waits for
// its ready lines.
func startAuthFixture(t *testing.T, args ...string) authFixture {
	t.Helper()
	lines := runFixtures(t, "mcp", append([]string{"authserver", "--mcp"}, args...)...)
	return authFixture{AS: lines["url"], MCP: lines["mcp"]}
}

// asStats are the authorization server fixture's counters.
type asStats struct {
	TokenRequests   int `json:"token_requests"`
	RefreshRequests int `json:"refresh_requests"`
	CodeExchanges   int `json:"code_exchanges"`
	Registrations   int `json:"registrations"`
	Revocations     int `json:"revocations"`
	RevokedGrants   int `json:"revoked_grants"`
	ReuseDetected   int `json:"reuse_detected"`
	LiveGrants      int `json:"live_grants"`
}

func (f authFixture) stats(t *testing.T) asStats {
	t.Helper()
	resp, err := http.Get(f.AS + "/_fixture/stats")
	if err != nil {
		t.Fatalf("reading the fixture's stats: %v", err)
	}
	defer resp.Body.Close()
	var st asStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("decoding the fixture's stats: %v", err)
	}
	return st
}

// oauthEnv is an env whose commands run with a headless browser that
// approves sign-ins, and which remembers every CLI output (for the canary
// checks).
type oauthEnv struct {
	*env
	browser string
}

func newOAuthEnv(t *testing.T) *oauthEnv {
	t.Helper()
	o := &oauthEnv{env: newEnv(t), browser: shellQuote(conformanceAdapter(t)) + " --browse"}
	o.extraEnv = append(o.extraEnv, "BROWSER="+o.browser)
	return o
}

// up starts proxyd in the background with debug logging (proxyd.log in
// the state dir); the env's cleanup stops it.
func (o *oauthEnv) up() {
	o.t.Helper()
	o.mustRun("up", "--log-level", "debug")
}

// waitReady polls status until server name is ready.
func (o *oauthEnv) waitReady(name string) {
	o.t.Helper()
	waitFor(o.t, fmt.Sprintf("server %q to be ready", name), func() (bool, string) {
		var st api.Status
		r := o.run("status", "-o", "json")
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil {
			return false, r.String()
		}
		for _, s := range st.Servers {
			if s.Name == name {
				return s.State == api.StateReady, fmt.Sprintf("%+v", s)
			}
		}
		return false, fmt.Sprintf("no server %q", name)
	})
}

// proxydLog returns proxyd.log from the state dir.
func (o *oauthEnv) proxydLog() string {
	o.t.Helper()
	b, err := os.ReadFile(filepath.Join(o.StateDir, "proxyd.log"))
	if err != nil {
		o.t.Fatalf("reading proxyd.log: %v", err)
	}
	return string(b)
}

// oauthConfig is a config with one HTTP server; extra is appended to the
// server entry (e.g. an oauth: block, indented by four spaces).
func oauthConfig(name, url, extra string) string {
	return fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: %s\n    url: %s\n%s", name, url, extra)
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// httpPost sends an empty POST to a fixture control URL and returns the
// status code.
func httpPost(u string) (int, error) {
	resp, err := http.Post(u, "application/x-www-form-urlencoded", nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// startAuthFixtureInProcess serves the authorization server fixture with a
// pre-registered client (redirects to any loopback port's /callback) and
// an MCP server it protects, in the test process.
func startAuthFixtureInProcess(t *testing.T, clientID, secret string) authFixture {
	t.Helper()
	as, err := authserver.Start(authserver.Options{})
	if err != nil {
		t.Fatalf("starting the authorization server fixture: %v", err)
	}
	t.Cleanup(func() { _ = as.Close() })
	as.AddClient(clientID, secret, "http://127.0.0.1/callback")
	m, err := mcpserver.Start(mcpserver.Options{Era: mcpserver.EraBoth, ValidateToken: as.Validate, AuthorizationServers: []string{as.URL()}})
	if err != nil {
		t.Fatalf("starting the protected MCP fixture: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return authFixture{AS: as.URL(), MCP: m.URL()}
}
