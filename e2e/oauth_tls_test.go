package e2e

import (
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/authserver"
	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// TestOAuthPrivateCA signs in to a server whose MCP endpoint and
// authorization server are both behind a private CA, trusted only through
// the server's tls.ca_file: proxyd runs without SSL_CERT_FILE, so
// discovery, registration, the code exchange and revocation must all use
// the CA file. The same server configured without it fails on the
// certificate.
func TestOAuthPrivateCA(t *testing.T) {
	t.Parallel()
	as := authserver.New(authserver.Options{})
	asTLS := httptest.NewTLSServer(as.Handler())
	t.Cleanup(asTLS.Close)
	as.SetIssuer(asTLS.URL)
	mcp := mcpserver.New(mcpserver.Options{Era: mcpserver.EraBoth, ValidateToken: as.Validate, AuthorizationServers: []string{asTLS.URL}})
	mcpTLS := httptest.NewTLSServer(mcp.Handler())
	t.Cleanup(mcpTLS.Close)
	// httptest's servers share one self-signed certificate: it is the CA.
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: asTLS.Certificate().Raw})
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	url := mcpTLS.URL + mcpserver.EndpointPath

	o := newOAuthEnv(t)
	o.writeConfig(fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: private\n    url: %s\n    tls: {ca_file: %s}\n  - name: noca\n    url: %s\n", url, caFile, url))
	o.up()
	// Only the headless browser, started by the login command, trusts the
	// CA through the environment; proxyd is already running without it.
	o.extraEnv = append(o.extraEnv, "SSL_CERT_FILE="+caFile)

	var lr api.LoginResult
	o.runJSON(0, &lr, "login", "private", "--timeout", "30s")
	if lr.Connection == nil || lr.Connection.State != api.StateReady {
		t.Fatalf("login = %+v (connection %+v), want the server ready", lr, lr.Connection)
	}
	r := o.mustRun("call", "private", "echo", "text=behind-a-private-ca")
	if !strings.Contains(r.stdout, "behind-a-private-ca") {
		t.Errorf("call output:\n%s", r)
	}
	var lo api.LogoutResult
	o.runJSON(0, &lo, "logout", "private")
	if !lo.Removed || !lo.Revoked {
		t.Errorf("logout = %+v, want the grant revoked over TLS", lo)
	}

	r = o.run("login", "noca", "--timeout", "30s")
	if r.code == 0 || !strings.Contains(r.stderr, "certificate") {
		t.Errorf("login without the CA file: want a certificate error:\n%s", r)
	}
}
