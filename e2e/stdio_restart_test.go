package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/fixtures/conformance"
	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/syncbuf"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// An open `mcpx stdio` bridge outlives a proxyd restart: its client keeps
// its session (the bridge replays the client's initialize to the new
// proxyd), in both protocol eras.
func TestStdioSurvivesRestart(t *testing.T) {
	fx := startFixture(t, mcpserver.EraBoth)
	for _, tc := range clientProtocols {
		t.Run(tc.name, func(t *testing.T) {
			e := upWith(t, fixtureConfig(fx.URL(), "auto"))
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			c, stderr := e.stdioClient(t, ctx, nil, tc.opts...)
			if got := callText(t, ctx, c, "fixture__echo", map[string]any{"text": "before"}); got != "before" {
				t.Fatalf("echo before the restart: %q", got)
			}

			e.mustRun("down")
			e.mustRun("up")
			e.waitServer("fixture", api.StateReady)

			if got := callText(t, ctx, c, "fixture__echo", map[string]any{"text": "after"}); got != "after" {
				t.Fatalf("echo after the restart: %q", got)
			}
			if names := listToolNames(t, ctx, c); !containsAll(names, "fixture__echo") {
				t.Errorf("tools/list after the restart: %v", names)
			}
			if tc.name == "legacy-pinned" && !strings.Contains(stderr.String(), "re-established the session") {
				t.Errorf("the bridge did not say it re-established the session:\n%s", stderr)
			}
		})
	}
}

// A call the bridge sends while proxyd is stopping (draining a slow call)
// is refused by that proxyd before anything runs; the bridge waits for
// the proxyd that replaces it and sends the call there. The call running
// when the shutdown began is drained and answered.
func TestStdioCallDuringShutdownRunsOnTheNextProxyd(t *testing.T) {
	fx := startFixture(t, mcpserver.EraBoth)
	for _, tc := range clientProtocols {
		t.Run(tc.name, func(t *testing.T) {
			e := upWith(t, fixtureConfig(fx.URL(), "auto"))
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			c, stderr := e.stdioClient(t, ctx, nil, tc.opts...)
			if got := callText(t, ctx, c, "fixture__echo", map[string]any{"text": "before"}); got != "before" {
				t.Fatalf("echo before the shutdown: %q", got)
			}

			type answer struct {
				text string
				err  error
			}
			call := func(name string, args map[string]any) chan answer {
				ch := make(chan answer, 1)
				go func() {
					res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
					if err != nil {
						ch <- answer{err: err}
						return
					}
					ch <- answer{text: toolText(res)}
				}()
				return ch
			}
			calls := fx.RequestCount("tools/call")
			// Long enough for 'mcpx down' to start and ask for the
			// shutdown while it runs, on a loaded machine too.
			slow := call("fixture__"+mcpserver.ToolSlowRead, map[string]any{"ms": 4000})
			waitFor(t, "the slow call to reach the upstream", func() (bool, string) {
				n := fx.RequestCount("tools/call")
				return n > calls, fmt.Sprint(n, " tools/call")
			})
			down := make(chan result, 1)
			go func() { down <- e.run("down") }()
			cl := api.NewClient(e.Socket, "e2e")
			waitFor(t, "proxyd to say it is stopping", func() (bool, string) {
				st, err := cl.Status(ctx)
				return err == nil && st.Stopping, fmt.Sprint(err)
			})
			during := call("fixture__echo", map[string]any{"text": "during"})
			if r := <-down; r.code != 0 {
				t.Fatalf("mcpx down:\n%s", r)
			}
			if got := <-slow; got.err != nil || got.text != "waited 4000 ms" {
				t.Errorf("the call running when the shutdown began: %q, %v; want its result", got.text, got.err)
			}
			select {
			case got := <-during:
				t.Fatalf("the call sent during the shutdown was answered before a proxyd was back: %q, %v", got.text, got.err)
			default:
			}
			e.mustRun("up")
			if got := <-during; got.err != nil || got.text != "during" {
				t.Fatalf("the call sent during the shutdown: %q, %v; want its echo from the new proxyd", got.text, got.err)
			}
			if tc.name == "legacy-pinned" && !strings.Contains(stderr.String(), "re-established the session") {
				t.Errorf("the bridge did not say it re-established the session:\n%s", stderr)
			}
		})
	}
}

// A bridge whose proxyd does not come back says why on stderr and exits,
// so its client can start it again.
func TestStdioExitsWhenProxydStaysAway(t *testing.T) {
	e, p := fixtureEnv(t, mcpserver.EraLegacy, "legacy")
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	c, stderr := e.stdioClient(t, ctx, []string{"--reconnect-wait", "300ms"}, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	if got := callText(t, ctx, c, "fixture__echo", map[string]any{"text": "before"}); got != "before" {
		t.Fatalf("echo: %q", got)
	}
	e.mustRun("down")
	_ = p.wait(t, runTimeout)

	_, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fixture__echo", Arguments: map[string]any{"text": "x"}}})
	if err == nil {
		t.Fatal("a call without proxyd succeeded")
	}
	waitFor(t, "the bridge to exit with a reason", func() (bool, string) {
		s := stderr.String()
		return strings.Contains(s, "proxyd did not come back within 300ms"), s
	})
}

// A legacy client's session state outlives a proxyd restart: the bridge
// re-establishes the session as soon as its GET stream finds proxyd
// restarted, without waiting for the client's next request, and replays
// the client's log level and resource subscriptions, so the new proxyd
// subscribes upstream for it again and sends the upstream its level.
func TestStdioRestoresSessionStateAfterRestart(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]json.RawMessage{} // params the upstream got, by method
	cs := conformance.New(conformance.Options{Era: "legacy"})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if json.Unmarshal(body, &m) == nil {
				mu.Lock()
				seen[m.Method] = append(seen[m.Method], m.Params)
				mu.Unlock()
			}
		}
		cs.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	got := func(method string) []json.RawMessage {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen[method])
	}

	e := upWith(t, fixtureConfig(up.URL+conformance.EndpointPath, "legacy"))
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	c, stderr := e.stdioClient(t, ctx, nil, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	//lint:ignore SA1019 the legacy era's resources/subscribe is what is tested
	if err := c.Subscribe(ctx, mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: "test://watched-resource"}}); err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1019 logging/setLevel is the legacy era's, which is tested
	if err := c.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelDebug}}); err != nil {
		t.Fatal(err)
	}
	subs, levels := len(got("resources/subscribe")), len(got("logging/setLevel"))
	if subs != 1 {
		t.Fatalf("the upstream got %d resources/subscribe, want 1", subs)
	}

	e.mustRun("down")
	e.mustRun("up")
	e.waitServer("fixture", api.StateReady)

	// Nothing from the client from here on.
	waitFor(t, "the new proxyd to subscribe upstream again", func() (bool, string) {
		n := len(got("resources/subscribe"))
		return n > subs, fmt.Sprint(n, " resources/subscribe")
	})
	waitFor(t, "the new proxyd to send the client's level upstream", func() (bool, string) {
		after := got("logging/setLevel")[levels:]
		for _, p := range after {
			if strings.Contains(string(p), `"debug"`) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("setLevel params since the restart: %s", after)
	})
	waitFor(t, "the bridge to say what it replayed", func() (bool, string) {
		s := stderr.String()
		return strings.Contains(s, "replayed the client's initialize and log level, 1 resource subscription(s)"), s
	})
}

// A request proxyd refuses unread (over limits.max_request_bytes) is
// answered to the client through the bridge as an error for that request,
// naming the limit, instead of an answer without an id it would wait on.
func TestStdioRequestOverLimitIsAnswered(t *testing.T) {
	fx := startFixture(t, mcpserver.EraLegacy)
	e := upWith(t, fixtureConfig(fx.URL(), "legacy")+"limits:\n  max_request_bytes: 100000\n")
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	c, _ := e.stdioClient(t, ctx, nil, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	_, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fixture__echo",
		Arguments: map[string]any{"text": strings.Repeat("x", 200_000)}}})
	if err == nil || !strings.Contains(err.Error(), "max_request_bytes") {
		t.Fatalf("a call over the limit: %v; want an error naming limits.max_request_bytes", err)
	}
	if got := callText(t, ctx, c, "fixture__echo", map[string]any{"text": "small"}); got != "small" {
		t.Fatalf("a call under the limit after it: %q", got)
	}
}

// upWith starts proxyd ('mcpx up') on config, whose server "fixture" it
// waits for, and stops it when the test ends.
func upWith(t *testing.T, config string) *env {
	t.Helper()
	e := newEnv(t)
	e.writeConfig(config)
	e.mustRun("up")
	t.Cleanup(func() { e.run("down") })
	e.waitServer("fixture", api.StateReady)
	return e
}

// stdioClient starts 'mcpx stdio' (with args after the command) on this
// env and an initialized MCP client on it; the bridge's stderr is returned,
// and logged if the test fails.
func (e *env) stdioClient(t *testing.T, ctx context.Context, args []string, opts ...client.ClientOption) (*client.Client, *syncbuf.Buffer) {
	t.Helper()
	stderr := &syncbuf.Buffer{}
	tr := transport.NewStdioWithOptions(mcpxBin, e.environ(), append(append(e.globals(), "stdio"), args...),
		transport.WithCommandStderrWriter(stderr))
	c := client.NewClient(tr, opts...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mcpx stdio stderr:\n%s", stderr)
		}
	})
	initClient(t, ctx, c)
	return c, stderr
}
