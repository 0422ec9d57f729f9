package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// everythingTools is how many tools server-everything lists to a client
// that declares sampling, elicitation and roots, as proxyd does upstream
// (it relays those requests to its clients): 13 plus get-roots-list,
// trigger-elicitation-request, trigger-url-elicitation and
// trigger-sampling-request.
const everythingTools = 17

// startEverythingHTTP runs server-everything's Streamable HTTP transport on
// a free loopback port and returns its URL. It binds every interface and
// has no host option: the test only ever talks to it on 127.0.0.1.
func startEverythingHTTP(t *testing.T, peers string) string {
	t.Helper()
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(filepath.Join(peers, nodeRel), filepath.Join(peers, everythingRel), "streamableHttp")
	cmd.Dir = peers
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "PORT=" + port}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting server-everything: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("server-everything output:\n%s", out)
		}
	})
	waitFor(t, "server-everything to listen on "+addr, func() (bool, string) {
		select {
		case <-done:
			t.Fatalf("server-everything exited:\n%s", out)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, err.Error()
		}
		c.Close()
		return true, ""
	})
	return "http://" + addr + "/mcp"
}

func TestServerEverything(t *testing.T) {
	peers := peersDir(t)
	tests := []struct {
		name string
		// add adds server-everything as "everything" to a running proxyd.
		add func(t *testing.T, e *env)
	}{
		{name: "stdio", add: func(t *testing.T, e *env) {
			// Through the CLI, as a user adds a stdio server.
			e.mustRun("servers", "add", "everything", "--", filepath.Join(peers, nodeRel), filepath.Join(peers, everythingRel))
		}},
		{name: "streamable-http", add: func(t *testing.T, e *env) {
			e.writeConfig(fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: everything\n    url: %s\n", startEverythingHTTP(t, peers)))
			e.mustRun("reload")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.writeConfig("listen: 127.0.0.1:0\n")
			e.startProxyd()
			tc.add(t, e)
			s := e.waitServer("everything", api.StateReady)
			t.Logf("server-everything: %s %s, era %s, protocol %s, %d tools", s.ServerName, s.ServerVersion, s.Era, s.ProtocolVersion, s.Tools)

			var tools []api.Tool
			e.runJSON(0, &tools, "tools", "everything")
			var names []string
			for _, tl := range tools {
				names = append(names, tl.Name)
			}
			if len(tools) != everythingTools || s.Tools != everythingTools {
				t.Errorf("tools everything lists %d (status says %d), want %d: %v", len(tools), s.Tools, everythingTools, names)
			}
			if !containsAll(names, "echo", "get-sum", "get-structured-content") {
				t.Errorf("tools everything: %v", names)
			}

			r := e.run("call", "everything", "echo", "message=hi")
			if r.code != 0 || !strings.Contains(r.stdout, "hi") {
				t.Errorf("call everything echo:\n%s", r)
			}
			var sum api.CallResponse
			e.runJSON(0, &sum, "call", "everything", "get-sum", "a=2", "b=3")
			if !strings.Contains(string(sum.Result), "5") {
				t.Errorf("get-sum 2+3: %s", sum.Result)
			}

			ci := e.connectInfo()
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			tr, err := transport.NewStreamableHTTP(ci.URL, transport.WithHTTPHeaders(bearerHeader(ci)))
			if err != nil {
				t.Fatalf("creating the transport: %v", err)
			}
			c := client.NewClient(tr)
			initClient(t, ctx, c)
			if got := callText(t, ctx, c, "everything__echo", map[string]any{"message": "through-proxyd"}); !strings.Contains(got, "through-proxyd") {
				t.Errorf("everything__echo through the downstream endpoint returned %q", got)
			}
		})
	}
}

// conformanceScenarios are the suite's server scenarios that apply to any
// MCP server, proxyd's aggregated endpoint included.
var conformanceScenarios = []string{
	"server-initialize",
	"ping",
	"tools-list",
	"logging-set-level",
	"dns-rebinding-protection",
}

// bearerForwarder puts the bearer on every request to target, keeping Host
// and Origin exactly as the runner sent them: the runner has no header
// option, and the endpoint must keep its own Host/Origin checks.
func bearerForwarder(t *testing.T, target, authorization string) *httptest.Server {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatalf("parsing %s: %v", target, err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = u.Scheme
			pr.Out.URL.Host = u.Host
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set("Authorization", authorization)
		},
		FlushInterval: -1, // stream SSE responses as they come
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv
}

type conformanceCheck struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

func TestConformanceServerScenarios(t *testing.T) {
	peers := peersDir(t)
	e, _ := fixtureEnv(t, mcpserver.EraBoth, "auto")
	ci := e.connectInfo()
	fwd := bearerForwarder(t, ci.URL, bearerHeader(ci)["Authorization"])
	fwdURL := fwd.URL + "/mcp"
	runnerEnv := e.environ()

	for _, scenario := range conformanceScenarios {
		t.Run(scenario, func(t *testing.T) {
			out := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(peers, nodeRel), filepath.Join(peers, conformanceRel),
				"server", "--url", fwdURL, "--scenario", scenario, "-o", out)
			cmd.Dir = peers
			cmd.Env = runnerEnv
			var buf bytes.Buffer
			cmd.Stdout, cmd.Stderr = &buf, &buf
			cmd.WaitDelay = 5 * time.Second
			runErr := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("conformance %s did not finish in time:\n%s", scenario, buf.String())
			}

			checks := readChecks(t, out)
			var failed []string
			for _, c := range checks {
				t.Logf("%s %s: %s %s", c.Status, c.ID, c.Name, c.ErrorMessage)
				if c.Status == "FAILURE" {
					failed = append(failed, fmt.Sprintf("%s (%s)", c.ID, c.ErrorMessage))
				}
			}
			if len(checks) == 0 {
				t.Errorf("conformance %s ran 0 checks:\n%s", scenario, buf.String())
			}
			if len(failed) > 0 || runErr != nil {
				t.Errorf("conformance %s: exit %v, failed checks %v\n%s", scenario, runErr, failed, buf.String())
			}
		})
	}
}

// readChecks reads every checks.json the runner wrote under dir.
func readChecks(t *testing.T, dir string) []conformanceCheck {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*", "checks.json"))
	if err != nil {
		t.Fatalf("finding checks.json: %v", err)
	}
	var all []conformanceCheck
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("reading %s: %v", f, err)
		}
		var cs []conformanceCheck
		if err := json.Unmarshal(b, &cs); err != nil {
			t.Fatalf("decoding %s: %v", f, err)
		}
		all = append(all, cs...)
	}
	return all
}
