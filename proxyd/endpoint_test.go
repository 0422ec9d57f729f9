package proxyd

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
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

// dialEndpoint opens an initialised MCP client session on proxyd's
// endpoint with its bearer and the given extra headers; it is closed when
// the test ends.
func dialEndpoint(t *testing.T, td *testDaemon, headers map[string]string, opts ...client.ClientOption) *client.Client {
	t.Helper()
	url, token := endpoint(t, td)
	h := map[string]string{"Authorization": "Bearer " + token}
	for k, v := range headers {
		h[k] = v
	}
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(h))
	if err != nil {
		t.Fatal(err)
	}
	cl := client.NewClient(tr, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	if _, err := cl.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "t", Version: "1"}}}); err != nil {
		t.Fatal(err)
	}
	return cl
}

// waitReady waits until status calls server ready: the endpoint lists it.
func waitReady(t testing.TB, td *testDaemon, server string) {
	t.Helper()
	waitfor.Cond(t, 20*time.Second, "server "+server+" to be ready", func() (bool, string) {
		st, err := td.client.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st.Servers {
			if s.Name == server && s.State == api.StateReady {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", st.Servers)
	})
}

func endpoint(t testing.TB, td *testDaemon) (url, token string) {
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
			var opts []client.ClientOption
			if pin != "" {
				opts = append(opts, client.WithProtocolVersion(pin))
			}
			cl := dialEndpoint(t, td, nil, opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
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

// TestEndpointFastPath checks the library-free path for legacy-era
// tools/call: the upstream's result comes through verbatim, and requests
// it must not take (unknown session, progress, unknown tool) still get the
// library's answers.
func TestEndpointFastPath(t *testing.T) {
	_, td := withFixture(t, mcpserver.EraBoth)
	url, token := endpoint(t, td)
	post, sid := legacySession(t, url, token)

	resp, body := post(sid, `{"jsonrpc":"2.0","id":"req-7","method":"tools/call","params":{"name":"fx__add","arguments":{"a":2,"b":3}}}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"id":"req-7"`) || !strings.Contains(body, `"structuredContent":{"sum":5}`) {
		t.Fatalf("fast path answer %d %s", resp.StatusCode, body)
	}
	// An unsupported protocol version is the library's 400, never served.
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"fx__add","arguments":{"a":1,"b":1}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "1999-01-01")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode == http.StatusOK {
		t.Fatalf("unsupported version served: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}
	// An unknown session is the library's 404, never served.
	resp, _ = post("mcpx-00000000000000000000000000000000", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fx__add","arguments":{"a":1,"b":1}}}`)
	if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("unknown session: status %d", resp.StatusCode)
	}
	// An unknown tool gets the library's JSON-RPC error.
	_, body = post(sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fx__nope","arguments":{}}}`)
	if !strings.Contains(body, `"error"`) {
		t.Fatalf("unknown tool: %s", body)
	}
	// A call with a progress token goes through the library and still works.
	_, body = post(sid, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"p"},"_meta":{"progressToken":"tok"}}}`)
	if !strings.Contains(body, `"text":"p"`) {
		t.Fatalf("progress call: %s", body)
	}
	recs := listActivity(t, td)
	if len(recs) != 3 || recs[2].Tool != "add" || !strings.HasPrefix(recs[2].Client, "session:") {
		t.Fatalf("activity %+v", recs)
	}
	// The unknown tool is recorded as the client's mistake.
	if r := recs[1]; r.Tool != "nope" || r.ErrorClass != "proxy_policy" || r.FaultDomain != "client" {
		t.Fatalf("unknown tool record %+v", r)
	}
}

// A tool with an x-mcp-header parameter, called by a modern-era client:
// the Mcp-Param-* header the client sends is checked against the body (the
// fast path steps aside for the library), and proxyd sends the upstream
// its own.
func TestEndpointParamHeaders(t *testing.T) {
	fx, td := withFixture(t, mcpserver.EraModern)
	dial := func(extra map[string]string) *client.Client {
		t.Helper()
		cl := dialEndpoint(t, td, extra)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		// The client mirrors x-mcp-header parameters of tools it has listed.
		if _, err := cl.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
			t.Fatal(err)
		}
		return cl
	}
	call := func(cl *client.Client) (*mcp.CallToolResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		return cl.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx__region_echo",
			Arguments: map[string]any{"region": "eu-west", "text": "hi"}}})
	}
	res, err := call(dial(nil))
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := res.Content[0].(mcp.TextContent); !ok || tc.Text != "eu-west: hi" {
		t.Fatalf("result %+v", res.Content)
	}
	// A header that disagrees with the body is refused, never forwarded.
	if _, err := call(dial(map[string]string{"Mcp-Param-Region": "elsewhere"})); err == nil {
		t.Fatal("a mismatched Mcp-Param-Region header was served")
	}
	if n := fx.Executions(mcpserver.ToolRegionEcho); n != 1 {
		t.Fatalf("upstream executed region_echo %d times, want 1", n)
	}
}

// legacyPost returns a function that POSTs one JSON-RPC body to the
// endpoint as a legacy-era client, in session (none before initialize),
// and returns the response with its body read.
func legacyPost(t *testing.T, url, token string) func(session, body string) (*http.Response, string) {
	return func(session, body string) (*http.Response, string) {
		t.Helper()
		resp, err := http.DefaultClient.Do(legacyRequest(url, token, session, body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
}

// legacyRequest is a legacy-era POST of body to the endpoint, in session
// unless it is "".
func legacyRequest(url, token, session, body string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	return req
}

// legacySession opens an initialised legacy-era session on the endpoint
// and returns legacyPost's post with the session's id.
func legacySession(t *testing.T, url, token string) (post func(session, body string) (*http.Response, string), sid string) {
	t.Helper()
	post = legacyPost(t, url, token)
	resp, _ := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if sid = resp.Header.Get("Mcp-Session-Id"); sid == "" {
		t.Fatal("no session id")
	}
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return post, sid
}

// Answers of many sizes relayed at once each reach their own client
// whole: the buffers an answer is encoded in are reused once written, so
// one reused early would show here as another call's bytes.
func TestEndpointConcurrentLargeAnswersIntact(t *testing.T) {
	_, td := withFixture(t, mcpserver.EraBoth)
	url, token := endpoint(t, td)
	_, sid := legacySession(t, url, token)
	const clients, calls = 6, 4
	var wg sync.WaitGroup
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				id := fmt.Sprintf("c%d-%d", g, i)
				text := strings.Repeat(id+" ", (40<<10+g*9<<10+i*3<<10)/(len(id)+1))
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":%q}}}`, id, text)
				resp, err := http.DefaultClient.Do(legacyRequest(url, token, sid, body))
				if err != nil {
					t.Errorf("call %s: %v", id, err)
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Errorf("call %s: status %d, %v", id, resp.StatusCode, err)
					return
				}
				if !strings.HasPrefix(string(b), `{"jsonrpc":"2.0","id":"`+id+`",`) || !strings.Contains(string(b), `"text":"`+text+`"`) {
					t.Errorf("call %s: answer of %d bytes is not its own echo: %.80s…", id, len(b), b)
				}
			}
		}()
	}
	wg.Wait()
}

// An unknown name is refused and recorded, never sent: not even when the
// upstream knows the part after the prefix (its own name of a tool
// exposed under another, or a tool of a server that is not ready).
func TestUnknownToolIsNeverSent(t *testing.T) {
	var runs atomic.Int64
	s := server.NewMCPServer("odd-names", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("has space", mcp.WithString("x")), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		runs.Add(1)
		return mcp.NewToolResultText("ran"), nil
	})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(s, server.WithStateful(true)))
	t.Cleanup(hs.Close)
	td := startDaemon(t, "listen: 127.0.0.1:0\nservers:\n  - name: up\n    url: "+hs.URL+"/mcp\n    protocol: legacy\n")
	waitReady(t, td, "up")
	url, token := endpoint(t, td)
	post, sid := legacySession(t, url, token)

	exposed := ""
	tools, err := td.client.Tools(context.Background(), "up")
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		if tl.Name == "has space" {
			exposed = tl.Exposed
		}
	}
	if exposed == "" || exposed == "up__has space" {
		t.Fatalf("exposed name %q: want one without the space", exposed)
	}
	_, body := post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__has space","arguments":{"x":"1"}}}`)
	if !strings.Contains(body, `"error"`) || !strings.Contains(body, "not found") {
		t.Fatalf("the upstream's own name: %s", body)
	}
	_, body = post(sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"`+exposed+`","arguments":{"x":"1"}}}`)
	if !strings.Contains(body, `"text":"ran"`) {
		t.Fatalf("the exposed name: %s", body)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the upstream ran the tool %d times: want once, for the exposed name only", n)
	}
	recs := listActivity(t, td)
	if len(recs) != 2 {
		t.Fatalf("activity %+v", recs)
	}
	// Newest first: the refused call is the second record.
	if r := recs[1]; r.Status != "error" || r.ErrorClass != "proxy_policy" || r.FaultDomain != "client" || !strings.Contains(r.Error, "exposes no tool") {
		t.Fatalf("refused call's record %+v", r)
	}
}

// A call of a tool whose server is not ready (its tools not served) is
// answered with a tool error naming the cause, in either era, not the
// library's "tool not found", and is not sent.
func TestCallOfAServerNotReady(t *testing.T) {
	// Nothing listens on a port just closed: the server never connects.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	fx, err := mcpserver.Start(mcpserver.Options{Era: mcpserver.EraLegacy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fx.Close() })
	td := startDaemon(t, "listen: 127.0.0.1:0\nservers:\n  - name: fx\n    url: "+fx.URL()+"\n  - name: down\n    url: http://"+dead+"/mcp\n")
	waitReady(t, td, "fx")
	waitfor.Cond(t, 20*time.Second, "down to be in error", func() (bool, string) {
		st, err := td.client.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st.Servers {
			if s.Name == "down" && s.State == api.StateError {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", st.Servers)
	})
	url, token := endpoint(t, td)
	post, sid := legacySession(t, url, token)
	_, body := post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"down__echo","arguments":{"text":"x"}}}`)
	if !strings.Contains(body, `"isError":true`) || !strings.Contains(body, `connection refused`) || !strings.Contains(body, "fault_domain=upstream") {
		t.Fatalf("legacy client: %s", body)
	}
	// A name under no server's prefix is still the library's "not found".
	if _, body := post(sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nobody__echo","arguments":{}}}`); !strings.Contains(body, `"error"`) {
		t.Fatalf("a name no server has: %s", body)
	}
	// A subscription to a URI no ready server lists names the server
	// that is not (its resources are withdrawn).
	if _, body := post(sid, `{"jsonrpc":"2.0","id":5,"method":"resources/subscribe","params":{"uri":"test://elsewhere"}}`); !strings.Contains(body, `-32002`) || !strings.Contains(body, "not ready: down (error)") {
		t.Fatalf("subscribe with a server not ready: %s", body)
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"down__echo","arguments":{"text":"x"},`+
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`))
	for k, v := range map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "down__echo"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"isError":true`) || !strings.Contains(string(b), `"resultType":"complete"`) {
		t.Fatalf("modern client: %d %s", resp.StatusCode, b)
	}
	var downs int
	for _, r := range listActivity(t, td) {
		if r.Server == "down" {
			downs++
			if r.ErrorClass != "network" || r.FaultDomain != "upstream" || r.Tool != "echo" {
				t.Errorf("record %+v", r)
			}
		}
	}
	if downs != 2 {
		t.Errorf("%d records of down's calls, want 2", downs)
	}
}
