package proxyd

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

func withFixture(t *testing.T, era mcpserver.Era) (*mcpserver.Server, *testDaemon) {
	t.Helper()
	fx, err := mcpserver.Start(mcpserver.Options{Era: era})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fx.Close() })
	td := startDaemon(t, "listen: 127.0.0.1:0\nservers:\n  - name: fx\n    url: "+fx.URL()+"\n")
	waitReady(t, td, "fx")
	return fx, td
}

func waitReady(t *testing.T, td *testDaemon, server string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := td.client.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st.Servers {
			if s.Name == server && s.State == api.StateReady {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %s never ready: %+v", server, st.Servers)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func endpoint(t *testing.T, td *testDaemon) (url, token string) {
	t.Helper()
	info, err := td.client.ConnectInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(td.stateDir, TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	return info.URL, strings.TrimSpace(string(b))
}

func TestEndpointRequiresBearerAndLoopbackOrigin(t *testing.T) {
	_, td := withFixture(t, mcpserver.EraBoth)
	url, token := endpoint(t, td)
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	tests := []struct {
		name   string
		header map[string]string
		host   string
		want   int
	}{
		{"no bearer", nil, "", http.StatusUnauthorized},
		{"wrong bearer", map[string]string{"Authorization": "Bearer nope"}, "", http.StatusUnauthorized},
		{"foreign host", map[string]string{"Authorization": "Bearer " + token}, "evil.example:80", http.StatusForbidden},
		{"foreign origin", map[string]string{"Authorization": "Bearer " + token, "Origin": "https://evil.example"}, "", http.StatusForbidden},
		{"good", map[string]string{"Authorization": "Bearer " + token, "Origin": "http://localhost:3000"}, "", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
}

func TestEndpointServesUpstreamTools(t *testing.T) {
	for _, pin := range []string{"", mcp.LATEST_LEGACY_PROTOCOL_VERSION} {
		t.Run("client "+pin, func(t *testing.T) {
			fx, td := withFixture(t, mcpserver.EraBoth)
			url, token := endpoint(t, td)
			tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
			if err != nil {
				t.Fatal(err)
			}
			var opts []client.ClientOption
			if pin != "" {
				opts = append(opts, client.WithProtocolVersion(pin))
			}
			cl := client.NewClient(tr, opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := cl.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if _, err := cl.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "t", Version: "1"}}}); err != nil {
				t.Fatal(err)
			}
			tools, err := cl.ListTools(ctx, mcp.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var echo *mcp.Tool
			for i := range tools.Tools {
				if tools.Tools[i].Name == "fx__echo" {
					echo = &tools.Tools[i]
				}
			}
			if echo == nil {
				t.Fatalf("fx__echo not listed: %d tools", len(tools.Tools))
			}
			if echo.Annotations.ReadOnlyHint == nil || !*echo.Annotations.ReadOnlyHint {
				t.Fatal("annotations were not passed through")
			}
			res, err := cl.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"text": "through proxyd"}}})
			if err != nil {
				t.Fatal(err)
			}
			if tc, ok := res.Content[0].(mcp.TextContent); !ok || tc.Text != "through proxyd" {
				t.Fatalf("result %+v", res.Content)
			}
			if fx.Executions("echo") != 1 {
				t.Fatalf("upstream executed echo %d times", fx.Executions("echo"))
			}
			// The call is in the activity log, attributed to the MCP client.
			recs := listActivity(t, td)
			if len(recs) != 1 || recs[0].Tool != "echo" || recs[0].Status != "ok" || !strings.HasPrefix(recs[0].Client, "session:") && recs[0].Client != "mcp" {
				t.Fatalf("activity %+v", recs)
			}
		})
	}
}
