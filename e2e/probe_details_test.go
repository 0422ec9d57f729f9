package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/fixtures/tlsfixtures"
	"github.com/mcpx-dev/mcpx/probe"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// TestProbeDetails: the certificate an operator looks for (subject,
// issuer, names, validity, SHA-256) under the table, the chain with
// --show-certs (PEM in JSON), a web server refusing POST is not_mcp, and
// login of a server that needs none says so.
func TestProbeDetails(t *testing.T) {
	e := newEnv(t)
	ok, err := tlsfixtures.Start(tlsfixtures.KindOK)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ok.Close)
	expired, err := tlsfixtures.Start(tlsfixtures.KindExpired)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(expired.Close)

	r := e.run("probe", ok.URL, "--ca-file", ok.CAFile)
	for _, want := range []string{"certificate:", "subject:", "issuer:", "names:", "valid:", "days left", "sha256:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("probe table lacks %q\n%s", want, r)
		}
	}
	if strings.Contains(r.stdout, "BEGIN CERTIFICATE") {
		t.Errorf("PEM printed without --show-certs\n%s", r)
	}
	r = e.run("probe", ok.URL, "--ca-file", ok.CAFile, "--show-certs")
	if !strings.Contains(r.stdout, "certificate 1 of") || !strings.Contains(r.stdout, "BEGIN CERTIFICATE") {
		t.Errorf("--show-certs lacks the chain's PEM\n%s", r)
	}
	r = e.run("probe", expired.URL, "--ca-file", expired.CAFile, "-o", "json", "--show-certs")
	var rep probe.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 15 || !strings.Contains(r.stdout, `"sha256"`) || !strings.Contains(r.stdout, "BEGIN CERTIFICATE") {
		t.Errorf("expired certificate -o json --show-certs: want exit 15 with the fingerprint and PEM\n%s", r)
	}
	if r := e.run("probe", expired.URL, "--ca-file", expired.CAFile); !strings.Contains(r.stdout, "(expired ") {
		t.Errorf("an expired certificate's details are not shown\n%s", r)
	}

	// A plain web server that refuses POST is not an MCP server, not a failing one.
	for _, status := range []int{http.StatusMethodNotAllowed, http.StatusNotImplemented} {
		web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(status)
			fmt.Fprint(w, "<html><body><h1>Method Not Allowed</h1></body></html>")
		}))
		r := e.run("probe", web.URL+"/", "-o", "json")
		web.Close()
		if r.code != 18 || !strings.Contains(r.stdout, `"not_mcp"`) {
			t.Errorf("HTTP %d with HTML: want not_mcp (exit 18)\n%s", status, r)
		}
	}

	// login of a server that needs no sign-in.
	fx := startFixture(t, mcpserver.EraBoth)
	e.writeConfig(fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: open\n    url: %s\n", fx.URL()))
	e.startProxyd()
	e.waitServer("open", api.StateReady)
	if r := e.run("login", "open"); r.code != 0 || !strings.Contains(r.stdout, "no sign-in needed") {
		t.Errorf("login of an open server: want 'no sign-in needed', exit 0\n%s", r)
	}
	if r := e.mustRun("auth", "status"); strings.Contains(r.stdout, "mcpx login open") || !strings.Contains(r.stdout, "no sign-in needed") {
		t.Errorf("auth status suggests a sign-in the server does not need\n%s", r)
	}
}
