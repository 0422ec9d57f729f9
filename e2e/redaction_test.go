package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/probe"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// TestURLCredentialsNeverPrinted: a server URL with a password and an API
// key in its query (the config refuses userinfo) is shown the same way, credentials replaced, by every
// command that prints it (status, servers with proxyd up and down, auth
// status, probe), and the canaries appear in no output and no log.
func TestURLCredentialsNeverPrinted(t *testing.T) {
	t.Parallel()
	const pw, key = "canary-url-password-5d1e", "canary-url-apikey-9b7c"
	fx := startFixture(t, mcpserver.EraBoth)
	withCreds := fx.URL() + "?api_key=" + key + "&pass=" + pw + "&region=eu"
	want := fx.URL() + "?api_key=[REDACTED]&pass=[REDACTED]&region=eu"

	// A server nothing listens on: its connect errors are logged and shown.
	dead := "http://" + freeAddr(t) + "/mcp?api_key=" + key + "&pass=" + pw

	e := newEnv(t)
	e.writeConfig(fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: fixture\n    url: %s\n  - name: dead\n    url: %s\n", withCreds, dead))
	p := e.startProxyd()
	e.waitServer("fixture", api.StateReady)
	e.waitServer("dead", api.StateError)

	var st api.Status
	e.runJSON(0, &st, "status")
	var servers []api.ServerStatus
	e.runJSON(0, &servers, "servers")
	var auth []api.AuthStatus
	e.runJSON(0, &auth, "auth", "status")
	var rep probe.Report
	e.runJSON(0, &rep, "probe", "fixture")
	e.run("status")
	e.run("auth", "status")
	shown := map[string]string{"probe (proxyd)": rep.Target}
	for _, s := range st.Servers {
		if s.Name == "fixture" {
			shown["status"] = s.Target
		}
	}
	for _, s := range servers {
		if s.Name == "fixture" {
			shown["servers"] = s.Target
		}
	}
	for _, a := range auth {
		if a.Server == "fixture" {
			shown["auth status"] = a.URL
		}
	}
	e.stopAll()

	var down []api.ServerStatus
	e.runJSON(0, &down, "servers")
	for _, s := range down {
		if s.Name == "fixture" {
			shown["servers (proxyd down)"] = s.Target
		}
	}
	var inproc probe.Report
	e.runJSON(0, &inproc, "probe", "fixture")
	shown["probe (in-process)"] = inproc.Target

	if len(shown) != 6 {
		t.Errorf("got the URL from %d places, want 6: %v", len(shown), shown)
	}
	for where, got := range shown {
		if got != want {
			t.Errorf("%s shows %q, want %q", where, got, want)
		}
	}
	outputs := append(append([]string(nil), e.outputs...), p.stderr.String())
	for i, out := range outputs {
		for _, canary := range []string{pw, key} {
			if strings.Contains(out, canary) {
				t.Errorf("output #%d holds a URL credential:\n%s", i, out)
			}
		}
	}
	if t.Failed() {
		b, _ := json.MarshalIndent(shown, "", "  ")
		t.Logf("shown:\n%s", b)
	}
}
