package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcpx-dev/mcpx/internal/syncbuf"
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
	return startEverythingOver(t, peers, "streamableHttp", "/mcp")
}

// startEverythingOver is startEverythingHTTP for another of its
// transports (its argument: "sse" serves the old HTTP+SSE transport at
// /sse), returning the URL of path.
func startEverythingOver(t *testing.T, peers, transport, path string) string {
	t.Helper()
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(filepath.Join(peers, nodeRel), filepath.Join(peers, everythingRel), transport)
	cmd.Dir = peers
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "PORT=" + port}
	out := &syncbuf.Buffer{}
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
	return "http://" + addr + path
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
