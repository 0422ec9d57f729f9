package e2e

import (
	"context"
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
