package downstream

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
)

// listBackend serves fixed upstream lists, copied on each call as the
// daemon copies its connections' lists; with flap, the last upstream is
// ready every other call.
type listBackend struct {
	ups  []Upstream
	flap bool
	n    *int
}

func (b listBackend) Upstreams() []Upstream {
	ups := b.ups
	if b.flap {
		*b.n++
		if *b.n%2 == 0 {
			ups = ups[:len(ups)-1]
		}
	}
	out := make([]Upstream, len(ups))
	for i, u := range ups {
		u.Tools = append([]Tool(nil), u.Tools...)
		out[i] = u
	}
	return out
}

func (listBackend) CallTool(context.Context, string, string, json.RawMessage, CallMeta) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultText("ok"), nil
}

func (listBackend) GetPrompt(context.Context, string, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	return &mcp.GetPromptResult{}, nil
}

func (listBackend) ReadResource(context.Context, string, mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	return &mcp.ReadResourceResult{}, nil
}

// listTools lists a fixture's tools through the MCP library's client, as
// an upstream connection does.
func listTools(tb testing.TB, extra int) []Tool {
	fx, err := mcpserver.Start(mcpserver.Options{Era: mcpserver.EraLegacy, ExtraTools: extra})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = fx.Close() })
	cl, err := client.NewStreamableHttpClient(fx.URL())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cl.Close() })
	ctx := context.Background()
	if _, err := cl.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.LATEST_LEGACY_PROTOCOL_VERSION, ClientInfo: mcp.Implementation{Name: "bench", Version: "0"}}}); err != nil {
		tb.Fatal(err)
	}
	var tools []mcp.Tool
	var cursor mcp.Cursor
	for {
		req := mcp.ListToolsRequest{}
		req.Params.Cursor = cursor
		res, err := cl.ListTools(ctx, req)
		if err != nil {
			tb.Fatal(err)
		}
		tools = append(tools, res.Tools...)
		if res.NextCursor == "" {
			return toolsOf(tools...)
		}
		cursor = res.NextCursor
	}
}

// BenchmarkSyncManyTools times one publish of the lists with a
// 10,000-tool upstream next to a small one: what a state change of any
// server costs, and what 'mcpx status' may wait for. unchanged: the
// lists are the same (a server changed state and came back before the
// publish); flapping: the small one comes and goes, publish by publish.
func BenchmarkSyncManyTools(b *testing.B) {
	ups := []Upstream{
		{Name: "many", Prefix: "many__", Tools: listTools(b, 10_000)},
		{Name: "small", Prefix: "small__", Tools: listTools(b, 0)},
	}
	for _, flap := range []bool{false, true} {
		name := map[bool]string{false: "unchanged", true: "flapping"}[flap]
		b.Run(name, func(b *testing.B) {
			s := New(listBackend{ups: ups, flap: flap, n: new(int)}, "bench", slog.New(slog.NewTextHandler(io.Discard, nil)))
			s.Sync()
			for b.Loop() {
				s.Sync()
			}
		})
	}
}
