package probe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpx-dev/mcpx/fixtures/tlsfixtures"
	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/probe"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// Canary secrets: none may appear anywhere in a report.
const (
	canaryHeader = "canary-header-value-5f1e"
	canaryBearer = "canary-bearer-token-77aa"
	canaryUser   = "canary-user-0c3d"
	canaryPass   = "canary-pass-9b2f"
	canaryQuery  = "canary-query-token-4e4e"
)

var canaries = []string{canaryHeader, canaryBearer, canaryUser, canaryPass, canaryQuery}

// withSecrets puts every kind of secret into the probe's options.
func withSecrets(o *probe.Options) {
	o.Target = strings.Replace(o.Target, "://", "://"+canaryUser+":"+canaryPass+"@", 1) + "?access_token=" + canaryQuery + "&page=1"
	o.Headers = map[string]string{"X-Api-Key": canaryHeader}
	o.BearerToken = canaryBearer
}

func assertNoCanary(t *testing.T, rep *probe.Report) {
	t.Helper()
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatalf("marshal report: %v", err)
	}
	for _, c := range canaries {
		if strings.Contains(string(b), c) {
			t.Fatalf("secret %q leaked into the report: %s", c, b)
		}
	}
}

func TestRedactionThroughFixtures(t *testing.T) {
	for _, kind := range []string{
		tlsfixtures.KindOK, tlsfixtures.KindAuthOK, tlsfixtures.KindAuthPRMMissing, tlsfixtures.KindHTTP404,
		tlsfixtures.KindHTTP200NotMCP, tlsfixtures.KindSelfSigned, tlsfixtures.KindRedirectCrossOrigin,
		tlsfixtures.KindRefused, tlsfixtures.KindPlainToTLS,
	} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			rep := probeFixture(t, kind, withSecrets)
			assertNoCanary(t, rep)
			if !strings.Contains(rep.Target, redact.Mark) {
				t.Errorf("target not redacted: %s", rep.Target)
			}
		})
	}
}

// echoServer reflects everything it received into its answers: headers,
// body, Location and WWW-Authenticate.
func echoServer(status int) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var all []string
		for k, vs := range r.Header {
			all = append(all, k+"="+strings.Join(vs, ","))
		}
		echo := r.URL.String() + " " + strings.Join(all, " ")
		w.Header().Set("Server", "echo "+echo)
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="invalid_token", error_description=%q`, echo))
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(status)
		fmt.Fprintf(w, "<html><title>\x1b[31m%s</title></html>", echo)
	}))
}

func TestRedactionOfEchoedSecrets(t *testing.T) {
	for _, status := range []int{http.StatusOK, http.StatusUnauthorized, http.StatusBadGateway, http.StatusForbidden} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			srv := echoServer(status)
			defer srv.Close()
			o := probe.Options{Target: srv.URL + "/mcp", Timeout: 2 * time.Second}
			withSecrets(&o)
			rep := probe.Run(context.Background(), o)
			assertNoCanary(t, rep)
			b, _ := json.Marshal(rep)
			if strings.Contains(string(b), "\x1b") || strings.Contains(string(b), `\u001b`) {
				t.Fatalf("control characters from the server reached the report: %s", b)
			}
		})
	}
}

func TestStoredTokenAccepted(t *testing.T) {
	rep := probeFixture(t, tlsfixtures.KindAuthOK, func(o *probe.Options) { o.BearerToken = tlsfixtures.ValidToken })
	if rep.Result.Code != probe.CodeOK {
		t.Fatalf("result %+v, want ok with a valid token", rep.Result)
	}
	assertStep(t, rep, probe.StepAuth, probe.StatusSkip)
}

func TestStoredTokenRefused(t *testing.T) {
	rep := probeFixture(t, tlsfixtures.KindAuthOK, func(o *probe.Options) {
		o.BearerToken = "expired-token-value"
		o.ServerName = "docs"
	})
	if rep.Result.Code != probe.CodeAuthRequired || !strings.Contains(rep.Result.Message, "refused") {
		t.Fatalf("result %+v, want auth_required saying the token was refused", rep.Result)
	}
	if rep.Result.Hint != "sign in with `mcpx login docs`" {
		t.Fatalf("hint %q does not name the login command for the server", rep.Result.Hint)
	}
}

func TestOverridesShown(t *testing.T) {
	f, err := tlsfixtures.Start(tlsfixtures.KindAuthASMetadataMissing)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	base := strings.TrimSuffix(f.URL, "/mcp")
	rep := probe.Run(context.Background(), probe.Options{Target: f.URL, CAFile: f.CAFile, Timeout: 2 * time.Second,
		OAuthClientID: "configured-client"})
	if rep.Result.Code != probe.CodeAuthMisconfigured {
		t.Fatalf("without overrides: %+v", rep.Result)
	}
	o := probe.Options{Target: f.URL, CAFile: f.CAFile, Timeout: 2 * time.Second}
	o.OAuth.AuthorizationEndpoint = base + "/as/authorize"
	o.OAuth.TokenEndpoint = base + "/as/token"
	o.OAuthClientID = "configured-client"
	o.AllowMissingPKCE = true
	rep = probe.Run(context.Background(), o)
	if rep.Result.Code != probe.CodeAuthRequired {
		t.Fatalf("with endpoint overrides: %+v", rep.Result)
	}
	auth := step(rep, probe.StepAuth)
	if !strings.Contains(auth.Detail, "overridden by config: authorization_endpoint, token_endpoint") {
		t.Fatalf("overrides not shown: %s", auth.Detail)
	}
}

func TestProtocolChoice(t *testing.T) {
	tests := []struct {
		kind, protocol, code, era string
	}{
		{tlsfixtures.KindOK, probe.ProtocolAuto, probe.CodeOK, "modern"},
		{tlsfixtures.KindOK, probe.ProtocolLegacy, probe.CodeOK, "legacy"},
		{tlsfixtures.KindOK, probe.ProtocolModern, probe.CodeOK, "modern"},
		{tlsfixtures.KindLegacy, probe.ProtocolAuto, probe.CodeOK, "legacy"},
		{tlsfixtures.KindLegacy, probe.ProtocolModern, probe.CodeNotMCP, "legacy"},
	}
	for _, tt := range tests {
		t.Run(tt.kind+"/"+tt.protocol, func(t *testing.T) {
			t.Parallel()
			rep := probeFixture(t, tt.kind, func(o *probe.Options) { o.Protocol = tt.protocol })
			if rep.Result.Code != tt.code {
				t.Fatalf("result %+v, want %s", rep.Result, tt.code)
			}
			if d := step(rep, probe.StepMCP).Detail; !strings.Contains(d, tt.era) {
				t.Fatalf("mcp detail %q does not name era %s", d, tt.era)
			}
		})
	}
}

func TestUnknownSessionCheck(t *testing.T) {
	tests := []struct {
		kind   string
		status api.StepStatus
		detail string
	}{
		{tlsfixtures.KindLegacy, probe.StatusOK, "session id issued"},
		{tlsfixtures.KindLegacySession400, probe.StatusWarn, "HTTP 400 instead of 404"},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			t.Parallel()
			rep := probeFixture(t, tt.kind, nil)
			s := assertStep(t, rep, probe.StepMCP, tt.status)
			if !strings.Contains(s.Detail, tt.detail) {
				t.Fatalf("mcp detail %q lacks %q", s.Detail, tt.detail)
			}
		})
	}
}

func TestCertificateExpiryWarning(t *testing.T) {
	rep := probeFixture(t, tlsfixtures.KindExpiringSoon, nil)
	if rep.Result.Code != probe.CodeOK {
		t.Fatalf("result %+v", rep.Result)
	}
	s := assertStep(t, rep, probe.StepTLS, probe.StatusWarn)
	if !strings.Contains(s.Detail, "less than 14 days") {
		t.Fatalf("tls detail %q does not warn about expiry", s.Detail)
	}
}

func TestSSETransport(t *testing.T) {
	s := server.NewMCPServer("sse-fixture", "0.1.0", server.WithToolCapabilities(false))
	sse := server.NewSSEServer(s)
	ts := httptest.NewServer(sse)
	defer ts.Close()
	rep := probe.Run(context.Background(), probe.Options{Target: ts.URL + "/sse", Transport: probe.TransportSSE, Timeout: 2 * time.Second})
	if rep.Result.Code != probe.CodeOK {
		b, _ := json.MarshalIndent(rep, "", " ")
		t.Fatalf("sse probe: %s", b)
	}
}

// TestHealthyOnlyWithTheFlagsCA: a configured server found healthy with
// a CA the probe was given, not its config's, is not called usable
// through proxyd: the hint names the config key to set.
func TestHealthyOnlyWithTheFlagsCA(t *testing.T) {
	for _, only := range []bool{false, true} {
		rep := probeFixture(t, tlsfixtures.KindOK, func(o *probe.Options) { o.ServerName, o.CAOnlyHere = "docs", only })
		if rep.Result.Code != probe.CodeOK {
			t.Fatalf("result %+v", rep.Result)
		}
		if got := strings.Contains(rep.Result.Hint, "tls: {ca_file:"); got != only {
			t.Errorf("CAOnlyHere %v: hint %q", only, rep.Result.Hint)
		}
	}
}

func TestLocalhostResolves(t *testing.T) {
	f, err := tlsfixtures.Start(tlsfixtures.KindOK)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep := probe.Run(context.Background(), probe.Options{Target: strings.Replace(f.URL, "127.0.0.1", "localhost", 1), CAFile: f.CAFile, Timeout: 2 * time.Second})
	if rep.Result.Code != probe.CodeOK {
		t.Fatalf("result %+v", rep.Result)
	}
	dns := step(rep, probe.StepDNS)
	if !strings.Contains(dns.Detail, "127.0.0.1") {
		t.Fatalf("dns detail %q lacks the address", dns.Detail)
	}
}

func TestInvalidTarget(t *testing.T) {
	for _, target := range []string{"", "ftp://x/y", "mcp.example.test/mcp", "https://"} {
		rep := probe.Run(context.Background(), probe.Options{Target: target})
		if rep.Result.Code != probe.CodeInvalidTarget || rep.Result.Hint == "" {
			t.Errorf("%q: result %+v", target, rep.Result)
		}
		if len(rep.Steps) != 6 {
			t.Errorf("%q: %d steps, want all 6 (skipped)", target, len(rep.Steps))
		}
	}
}

func TestSkipAfterHardFailure(t *testing.T) {
	rep := probeFixture(t, tlsfixtures.KindRefused, nil)
	for _, id := range []string{probe.StepTLS, probe.StepHTTP, probe.StepMCP, probe.StepAuth} {
		s := assertStep(t, rep, id, probe.StatusSkip)
		if !strings.Contains(s.Detail, "connection_unreachable") {
			t.Errorf("%s skip detail %q does not give the reason", id, s.Detail)
		}
	}
}

func TestNewOptions(t *testing.T) {
	cfg, err := config.Parse("c.yaml", []byte(`servers:
  - name: docs
    url: https://x.test/mcp
    transport: sse
    protocol: legacy
    headers: {A: from-config, B: kept}
    tls: {ca_file: /config-ca.pem}
    oauth: {client_id: cid, token_endpoint: "https://as.test/token", allow_missing_pkce_methods: true}
  - name: local
    command: ./server
`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := probe.NewOptions(api.ProbeRequest{Server: "docs", Headers: map[string]string{"A": "from-flag"}, CAFile: "/flag-ca.pem", TimeoutMS: 3000}, cfg.Server)
	if err != nil {
		t.Fatal(err)
	}
	want := probe.Options{Target: "https://x.test/mcp", Headers: map[string]string{"A": "from-flag", "B": "kept"}, CAFile: "/flag-ca.pem",
		Transport: probe.TransportSSE, Protocol: probe.ProtocolLegacy, Timeout: 3 * time.Second, ServerName: "docs", CAOnlyHere: true,
		OAuthClientID: "cid", AllowMissingPKCE: true}
	want.OAuth.TokenEndpoint = "https://as.test/token"
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("options:\n got %+v\nwant %+v", got, want)
	}
	// The CA the config already gives is not one proxyd lacks.
	if same, err := probe.NewOptions(api.ProbeRequest{Server: "docs", CAFile: "/config-ca.pem"}, cfg.Server); err != nil || same.CAOnlyHere {
		t.Errorf("the config's own CA given again: CAOnlyHere %v (%v)", same.CAOnlyHere, err)
	}
	for _, tt := range []struct {
		req     api.ProbeRequest
		unknown bool
	}{
		{api.ProbeRequest{Server: "nope"}, true},
		{api.ProbeRequest{Server: "local"}, false},
		{api.ProbeRequest{}, false},
		{api.ProbeRequest{Target: "https://x.test/mcp", Server: "docs"}, false},
		{api.ProbeRequest{Target: "https://x.test/mcp", Transport: "stdio"}, false},
		{api.ProbeRequest{Target: "https://x.test/mcp", Protocol: "v9"}, false},
	} {
		_, err := probe.NewOptions(tt.req, cfg.Server)
		var unknown *probe.UnknownServerError
		if err == nil || errors.As(err, &unknown) != tt.unknown {
			t.Errorf("%+v: err = %v", tt.req, err)
		}
	}
}

func step(rep *probe.Report, id string) probe.Step {
	for _, s := range rep.Steps {
		if s.ID == id {
			return s
		}
	}
	return probe.Step{}
}

func assertStep(t *testing.T, rep *probe.Report, id string, status api.StepStatus) probe.Step {
	t.Helper()
	s := step(rep, id)
	if s.Status != status {
		b, _ := json.MarshalIndent(rep, "", " ")
		t.Fatalf("step %s status %q, want %q: %s", id, s.Status, status, b)
	}
	return s
}

func TestInsufficientScope(t *testing.T) {
	f, err := tlsfixtures.Start(tlsfixtures.KindAuthOK)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	base := strings.TrimSuffix(f.URL, "/mcp")
	// A server that accepts the token but wants more scope answers 403
	// with a Bearer challenge; its metadata is the fixture's.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="mcp:admin", resource_metadata="`+base+`/.well-known/oauth-protected-resource/mcp"`)
		w.WriteHeader(http.StatusForbidden)
	}))
	defer srv.Close()
	rep := probe.Run(context.Background(), probe.Options{Target: srv.URL + "/mcp", CAFile: f.CAFile, Timeout: 2 * time.Second, BearerToken: "some-token"})
	// The resource named by the fixture's metadata is another URL: the
	// probe warns about the mismatch and still reports the scope.
	if rep.Result.Code != probe.CodeAuthRequired || rep.Result.HTTPStatus != http.StatusForbidden || !strings.Contains(rep.Result.Message, "mcp:admin") {
		b, _ := json.MarshalIndent(rep, "", " ")
		t.Fatalf("result: %s", b)
	}
}

func TestSlowResponseIsTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	rep := probe.Run(context.Background(), probe.Options{Target: srv.URL + "/mcp", Timeout: 300 * time.Millisecond})
	if rep.Result.Code != probe.CodeTimeout {
		b, _ := json.MarshalIndent(rep, "", " ")
		t.Fatalf("result: %s", b)
	}
	assertStep(t, rep, probe.StepHTTP, probe.StatusFail)
}
