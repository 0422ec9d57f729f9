package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// TestStaticTokens: a server that wants a static bearer token is usable
// with the token referenced from the environment in headers, or stored
// with 'mcpx auth set-token' from stdin; neither token is ever printed,
// logged or written to the config; connect-info shortens proxyd's own.
func TestStaticTokens(t *testing.T) {
	const pat = "ghp_canaryPAT0123456789abcdefXYZ"
	const stored = "sk_canaryStored0123456789abcdef"
	viaEnv, err := mcpserver.Start(mcpserver.Options{BearerToken: pat})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = viaEnv.Close() })
	viaStore, err := mcpserver.Start(mcpserver.Options{BearerToken: stored})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = viaStore.Close() })

	e := newEnv(t)
	e.extraEnv = append(e.extraEnv, "MCPX_E2E_PAT="+pat)
	config := fmt.Sprintf(`listen: 127.0.0.1:0
servers:
  - name: viaenv
    url: %s
    headers:
      Authorization: Bearer ${env:MCPX_E2E_PAT}
  - name: viastore
    url: %s
`, viaEnv.URL(), viaStore.URL())
	e.writeConfig(config)
	p := e.startProxyd()
	e.waitServer("viaenv", api.StateReady)
	if r := e.run("call", "viaenv", "echo", "text=by-reference"); r.code != 0 || !strings.Contains(r.stdout, "by-reference") {
		t.Fatalf("call with a referenced header:\n%s", r)
	}

	// The token comes on stdin, never on the command line.
	cmd := exec.Command(mcpxBin, append(e.globals(), "auth", "set-token", "viastore")...)
	cmd.Env = e.environ()
	cmd.Stdin = strings.NewReader(stored + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "token for viastore stored") {
		t.Fatalf("auth set-token: %v\n%s", err, out)
	}
	e.mu.Lock()
	e.outputs = append(e.outputs, string(out))
	e.mu.Unlock()
	e.waitServer("viastore", api.StateReady)
	if r := e.run("call", "viastore", "echo", "text=by-store"); r.code != 0 || !strings.Contains(r.stdout, "by-store") {
		t.Fatalf("call with a stored static token:\n%s", r)
	}
	var auth []api.AuthStatus
	e.runJSON(0, &auth, "auth", "status", "viastore")
	if len(auth) != 1 || !auth[0].SignedIn || auth[0].RefreshToken || auth[0].Grant != "static" {
		t.Errorf("auth status of a stored static token: %+v", auth)
	}
	// Nothing to refresh, and the drill says why.
	if r := e.run("drill", "refresh", "viastore"); r.code != 9 || !strings.Contains(r.stderr, "holds a static token (set with 'mcpx auth set-token')") {
		t.Errorf("drill refresh of a static token:\n%s", r)
	}
	if r := e.run("auth", "set-token", "nope"); r.code != 8 && r.code != 2 {
		t.Errorf("set-token for an unknown server:\n%s", r)
	}

	// connect-info: proxyd's bearer shortened unless asked for.
	own, err := os.ReadFile(filepath.Join(e.StateDir, "proxyd.token"))
	if err != nil {
		t.Fatal(err)
	}
	ownTok := strings.TrimSpace(string(own))
	r := e.mustRun("connect-info")
	if strings.Contains(r.stdout, ownTok) || !strings.Contains(r.stdout, "mcpx_…") {
		t.Errorf("connect-info printed proxyd's token in full (or not shortened):\n%s", r)
	}
	// The Cursor snippet is pasted as it is: no \u003c for its <...>.
	if !strings.Contains(r.stdout, `"Bearer <the token in `) {
		t.Errorf("connect-info's JSON snippet does not read as written:\n%s", r)
	}
	if r := e.mustRun("connect-info", "--show-token"); !strings.Contains(r.stdout, ownTok) {
		t.Errorf("connect-info --show-token lacks the token")
	}

	// Canaries: nowhere in what mcpx printed, proxyd logged or the config holds.
	e.mustRun("activity", "-o", "json")
	e.mustRun("status", "viaenv", "-o", "json")
	cfg, _ := os.ReadFile(e.Config)
	e.mu.Lock()
	outputs := strings.Join(e.outputs, "\n")
	e.mu.Unlock()
	for _, secret := range []string{pat, stored} {
		for what, text := range map[string]string{"CLI output": outputs, "proxyd's log": p.stderr.String(), "the config": string(cfg)} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds a token", what)
			}
		}
	}
	if string(cfg) != config {
		t.Errorf("the config file changed:\n%s", cfg)
	}
}
