package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// An open `mcpx stdio` bridge outlives a proxyd restart: its client keeps
// its session (the bridge replays the client's initialize to the new
// proxyd), in both protocol eras.
func TestStdioSurvivesRestart(t *testing.T) {
	fx := startFixture(t, mcpserver.EraBoth)
	for _, tc := range clientProtocols {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.writeConfig(fixtureConfig(fx.URL(), "auto"))
			e.mustRun("up")
			t.Cleanup(func() { e.run("down") })
			e.waitServer("fixture", api.StateReady)
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			stderr := &syncBuffer{}
			tr := transport.NewStdioWithOptions(mcpxBin, e.environ(), append(e.globals(), "stdio"),
				transport.WithCommandStderrWriter(stderr))
			c := client.NewClient(tr, tc.opts...)
			defer func() {
				if t.Failed() {
					t.Logf("mcpx stdio stderr:\n%s", stderr)
				}
			}()
			initClient(t, ctx, c)
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
			e := newEnv(t)
			e.writeConfig(fixtureConfig(fx.URL(), "auto"))
			e.mustRun("up")
			t.Cleanup(func() { e.run("down") })
			e.waitServer("fixture", api.StateReady)
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			stderr := &syncBuffer{}
			tr := transport.NewStdioWithOptions(mcpxBin, e.environ(), append(e.globals(), "stdio"),
				transport.WithCommandStderrWriter(stderr))
			c := client.NewClient(tr, tc.opts...)
			defer func() {
				if t.Failed() {
					t.Logf("mcpx stdio stderr:\n%s", stderr)
				}
			}()
			initClient(t, ctx, c)
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
			slow := call("fixture__"+mcpserver.ToolSlowRead, map[string]any{"ms": 2000})
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
			if got := <-slow; got.err != nil || got.text != "waited 2000 ms" {
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
	stderr := &syncBuffer{}
	tr := transport.NewStdioWithOptions(mcpxBin, e.environ(), append(e.globals(), "stdio", "--reconnect-wait", "300ms"),
		transport.WithCommandStderrWriter(stderr))
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	initClient(t, ctx, c)
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
