package e2e

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/syncbuf"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// connectInfo returns `mcpx connect-info -o json`.
func (e *env) connectInfo() api.ConnectInfo {
	e.t.Helper()
	var ci api.ConnectInfo
	e.runJSON(0, &ci, "connect-info", "--show-token")
	if !strings.HasPrefix(ci.URL, "http://127.0.0.1:") || !strings.HasPrefix(ci.Header, "Authorization: Bearer ") {
		e.t.Fatalf("connect-info: url %q, header prefix %q", ci.URL, strings.SplitN(ci.Header, " ", 3)[0])
	}
	return ci
}

// bearerHeader splits "Authorization: Bearer T" into a header map.
func bearerHeader(ci api.ConnectInfo) map[string]string {
	k, v, _ := strings.Cut(ci.Header, ":")
	return map[string]string{strings.TrimSpace(k): strings.TrimSpace(v)}
}

// initClient starts and initializes an MCP client, closing it in cleanup.
func initClient(t *testing.T, ctx context.Context, c *client.Client) *mcp.InitializeResult {
	t.Helper()
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(ctx); err != nil {
		t.Fatalf("starting the MCP client: %v", err)
	}
	res, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: mcp.LATEST_PROTOCOL_VERSION,
		ClientInfo:      mcp.Implementation{Name: "mcpx-e2e", Version: "1.0.0"},
	}})
	if err != nil {
		t.Fatalf("initializing the MCP client: %v", err)
	}
	return res
}

// callText calls a tool and returns its text content.
func callText(t *testing.T, ctx context.Context, c *client.Client, name string, args map[string]any) string {
	t.Helper()
	return callTextMeta(t, ctx, c, name, args, nil)
}

// callTextMeta is callText with the request's _meta (a progress token).
func callTextMeta(t *testing.T, ctx context.Context, c *client.Client, name string, args map[string]any, meta *mcp.Meta) string {
	t.Helper()
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args, Meta: meta}})
	if err != nil {
		t.Fatalf("calling %s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("calling %s: isError result: %+v", name, res.Content)
	}
	return toolText(res)
}

// toolText joins the text content of a tool result.
func toolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// listToolNames returns the tool names a client sees.
func listToolNames(t *testing.T, ctx context.Context, c *client.Client) []string {
	t.Helper()
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("listing tools: %v", err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	return out
}

func TestDownstreamEndpoint(t *testing.T) {
	e, _ := fixtureEnv(t, mcpserver.EraBoth, "auto")
	ci := e.connectInfo()
	if st := e.status(); st.MCPURL != ci.URL {
		t.Errorf("connect-info url %q differs from status mcp_url %q", ci.URL, st.MCPURL)
	}

	t.Run("guard", func(t *testing.T) {
		const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`
		tests := []struct {
			name   string
			auth   string // "", "good" or "wrong"
			host   string
			origin string
			want   int
		}{
			{name: "no bearer", want: http.StatusUnauthorized},
			{name: "wrong bearer", auth: "wrong", want: http.StatusUnauthorized},
			{name: "foreign host", auth: "good", host: "evil.example.com", want: http.StatusForbidden},
			{name: "foreign host with port", auth: "good", host: "evil.example.com:7861", want: http.StatusForbidden},
			{name: "foreign origin", auth: "good", origin: "http://evil.example.com", want: http.StatusForbidden},
			{name: "loopback origin", auth: "good", origin: "http://127.0.0.1:1234", want: http.StatusOK},
			{name: "localhost host", auth: "good", host: "localhost", want: http.StatusOK},
			{name: "bearer", auth: "good", want: http.StatusOK},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
				defer cancel()
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, ci.URL, strings.NewReader(initBody))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				switch tc.auth {
				case "good":
					req.Header.Set("Authorization", bearerHeader(ci)["Authorization"])
				case "wrong":
					req.Header.Set("Authorization", "Bearer mcpx_not_the_token")
				}
				if tc.host != "" {
					req.Host = tc.host
				}
				if tc.origin != "" {
					req.Header.Set("Origin", tc.origin)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("POST %s: %v", ci.URL, err)
				}
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				if resp.StatusCode != tc.want {
					t.Errorf("status %d, want %d; body: %s", resp.StatusCode, tc.want, body)
				}
				token := strings.TrimPrefix(bearerHeader(ci)["Authorization"], "Bearer ")
				if strings.Contains(string(body), token) {
					t.Errorf("the response body contains the bearer token")
				}
			})
		}
	})

	for _, tc := range clientProtocols {
		t.Run("client-"+tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			tr, err := transport.NewStreamableHTTP(ci.URL, transport.WithHTTPHeaders(bearerHeader(ci)))
			if err != nil {
				t.Fatalf("creating the transport: %v", err)
			}
			c := client.NewClient(tr, tc.opts...)
			res := initClient(t, ctx, c)
			t.Logf("downstream server %s %s, protocol %s", res.ServerInfo.Name, res.ServerInfo.Version, res.ProtocolVersion)
			names := listToolNames(t, ctx, c)
			if !containsAll(names, "fixture__echo", "fixture__add", "fixture__fail") {
				t.Errorf("tools/list through proxyd: %v", names)
			}
			if got := callText(t, ctx, c, "fixture__echo", map[string]any{"text": "downstream-" + tc.name}); got != "downstream-"+tc.name {
				t.Errorf("fixture__echo returned %q", got)
			}
			r, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fixture__fail"}})
			if err != nil || !r.IsError {
				t.Errorf("fixture__fail: want an isError result, got %+v, %v", r, err)
			}
		})
	}
}

// clientProtocols are the two ways an MCP client meets proxyd: negotiating
// the era, or pinned to the last legacy version.
var clientProtocols = []struct {
	name string
	opts []client.ClientOption
}{
	{name: "negotiated"},
	{name: "legacy-pinned", opts: []client.ClientOption{client.WithProtocolVersion(mcp.ProtocolVersion20251125)}},
}

func TestStdioBridge(t *testing.T) {
	e, _ := fixtureEnv(t, mcpserver.EraLegacy, "legacy")
	ci := e.connectInfo()
	if len(ci.StdioCommand) < 2 || !slices.Contains(ci.StdioCommand, "stdio") || !slices.Contains(ci.StdioCommand, e.Socket) {
		t.Fatalf("connect-info stdio_command %q: want the mcpx binary, this socket and stdio", ci.StdioCommand)
	}

	for _, tc := range clientProtocols {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			stderr := &syncbuf.Buffer{}
			// Launch exactly what connect-info tells stdio-only clients to run.
			tr := transport.NewStdioWithOptions(ci.StdioCommand[0], e.environ(), ci.StdioCommand[1:],
				transport.WithCommandStderrWriter(stderr))
			c := client.NewClient(tr, tc.opts...)
			defer func() {
				if t.Failed() {
					t.Logf("mcpx stdio stderr:\n%s", stderr)
				}
			}()
			initClient(t, ctx, c)
			names := listToolNames(t, ctx, c)
			if !containsAll(names, "fixture__echo", "fixture__write_note") {
				t.Errorf("tools/list over mcpx stdio: %v", names)
			}
			if got := callText(t, ctx, c, "fixture__echo", map[string]any{"text": "via-stdio"}); got != "via-stdio" {
				t.Errorf("fixture__echo over mcpx stdio returned %q", got)
			}
		})
	}

	// Without a daemon the bridge says so and exits 3.
	e2 := newEnv(t)
	r := e2.run("stdio")
	if r.code != 3 || !strings.Contains(r.stderr, "mcpx up") {
		t.Errorf("mcpx stdio without proxyd: want exit 3 and 'mcpx up':\n%s", r)
	}
}

func containsAll(have []string, want ...string) bool {
	set := map[string]bool{}
	for _, h := range have {
		set[h] = true
	}
	for _, w := range want {
		if !set[w] {
			return false
		}
	}
	return true
}
