package callerr

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// faultyUpstream is a real MCP server behind a handler that answers chosen
// tools/call requests with a fault instead.
func faultyUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	s := toolServer()
	srv := httptest.NewServer(faultHandler(t, server.NewStreamableHTTPServer(s, server.WithStateful(true))))
	t.Cleanup(srv.Close)
	return srv
}

func toolServer() *server.MCPServer {
	s := server.NewMCPServer("faulty", "1.0.0")
	s.AddTool(mcp.NewTool("ok"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("fine"), nil
	})
	s.AddTool(mcp.NewTool("iserror"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError("the tool failed"), nil
	})
	return s
}

// faultHandler answers tools/call requests for the fault tools itself and
// passes everything else to mcpHandler.
func faultHandler(t *testing.T, mcpHandler http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		if msg.Method != "tools/call" {
			mcpHandler.ServeHTTP(w, r)
			return
		}
		rpcErr := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32099,"message":"custom upstream failure"}}`, msg.ID)
		switch msg.Params.Name {
		case "html502":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>")
		case "rpc32099":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, rpcErr)
		case "sse32099":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: message\ndata: "+rpcErr+"\n\n")
		case "unauth":
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
			w.WriteHeader(http.StatusUnauthorized)
		case "json503":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":"overloaded"}`)
		case "malformed":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`)
		case "forget":
			w.WriteHeader(http.StatusNotFound)
		case "slow":
			<-r.Context().Done()
		case "reset":
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // close with RST
			}
			_ = conn.Close()
		default:
			mcpHandler.ServeHTTP(w, r)
		}
	})
}

func TestTransportRecordsFactsWithRealClient(t *testing.T) {
	srv := faultyUpstream(t)
	tests := []struct {
		tool      string
		era       string // legacy or modern
		check     func(t *testing.T, f Facts)
		class     string
		status    int
		reasonHas string
	}{
		{tool: "ok", era: "legacy", check: func(t *testing.T, f Facts) {
			if f.HTTPStatus != 200 || !f.Dispatched || f.HasJSONRPCCode {
				t.Errorf("facts %+v", f)
			}
		}},
		{tool: "iserror", era: "modern", class: ClassToolError},
		{tool: "html502", era: "legacy", class: ClassHTTP, status: 502, reasonHas: "HTML", check: func(t *testing.T, f Facts) {
			if f.HTTPStatus != 502 || !f.HTMLBody || f.ContentType != "text/html" {
				t.Errorf("facts %+v", f)
			}
		}},
		{tool: "rpc32099", era: "legacy", class: ClassJSONRPC, reasonHas: "-32099", check: func(t *testing.T, f Facts) {
			if f.HTTPStatus != 200 || !f.HasJSONRPCCode || f.JSONRPCCode != -32099 {
				t.Errorf("facts %+v", f)
			}
		}},
		{tool: "rpc32099", era: "modern", class: ClassJSONRPC, reasonHas: "-32099"},
		{tool: "sse32099", era: "legacy", class: ClassJSONRPC, reasonHas: "-32099", check: func(t *testing.T, f Facts) {
			if f.ContentType != "text/event-stream" || f.JSONRPCCode != -32099 {
				t.Errorf("facts %+v", f)
			}
		}},
		{tool: "unauth", era: "legacy", class: ClassAuth, status: 401, check: func(t *testing.T, f Facts) {
			if f.HTTPStatus != 401 {
				t.Errorf("facts %+v", f)
			}
		}},
		{tool: "json503", era: "modern", class: ClassHTTP, status: 503, reasonHas: "application/json"},
		{tool: "malformed", era: "legacy", class: ClassJSONRPC, reasonHas: "not valid JSON-RPC"},
		{tool: "forget", era: "legacy", class: ClassSessionTerminated, status: 404, check: func(t *testing.T, f Facts) {
			if !f.SessionLost {
				t.Errorf("facts %+v", f)
			}
		}},
		{tool: "forget", era: "modern", class: ClassHTTP, status: 404},
		{tool: "slow", era: "legacy", class: ClassTimeout},
		{tool: "reset", era: "legacy", class: ClassNetwork, check: func(t *testing.T, f Facts) {
			if f.HTTPStatus != 0 || f.TransportErr == nil || !f.Dispatched {
				t.Errorf("facts %+v", f)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.era+"/"+tt.tool, func(t *testing.T) {
			c := newClient(t, srv.URL, tt.era)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tt.tool == "slow" {
				ctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
			}
			callCtx, rec := WithRecorder(ctx)
			req := mcp.CallToolRequest{}
			req.Params.Name = tt.tool
			res, err := c.CallTool(callCtx, req)
			f := rec.Facts()
			if tt.check != nil {
				tt.check(t, f)
			}
			got := Classify(Input{Result: res, Err: err, Facts: f, Transport: TransportStreamableHTTP})
			if got.Class != tt.class || got.HTTPStatus != tt.status {
				t.Fatalf("Classify = %+v (err %v, facts %+v), want %s/%d", got, err, f, tt.class, tt.status)
			}
			if !strings.Contains(got.Reason, tt.reasonHas) {
				t.Errorf("reason %q lacks %q", got.Reason, tt.reasonHas)
			}
		})
	}
}

func newClient(t *testing.T, url, era string) *client.Client {
	t.Helper()
	httpClient := &http.Client{Transport: NewTransport(http.DefaultTransport.(*http.Transport).Clone())}
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPBasicClient(httpClient))
	if err != nil {
		t.Fatal(err)
	}
	var opts []client.ClientOption
	if era == "legacy" {
		opts = append(opts, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	}
	c := client.NewClient(tr, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	if era == "legacy" {
		init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if got := mcp.IsModernProtocol(c.ProtocolVersion()); got != (era == "modern") {
		t.Fatalf("negotiated %q, want era %s", c.ProtocolVersion(), era)
	}
	return c
}

// Requests without a recorder pass through untouched, bodies intact.
func TestTransportWithoutRecorder(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"error":{"code":-32099,"message":"m"}}`)
	}))
	defer srv.Close()
	hc := &http.Client{Transport: NewTransport(nil)}
	for _, withRec := range []bool{false, true} {
		ctx, rec := context.Background(), (*Recorder)(nil)
		if withRec {
			ctx, rec = WithRecorder(ctx)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "-32099") || !strings.HasSuffix(string(b), "}}") {
			t.Errorf("body altered: %q", b)
		}
		if f := rec.Facts(); withRec != f.HasJSONRPCCode {
			t.Errorf("recorder %v: facts %+v", withRec, f)
		}
	}
}

// A large body is passed through whole and not parsed.
func TestTransportLargeBody(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":1,"result":{"pad":"` + strings.Repeat("x", 3*peekLimit) + `"}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, big)
	}))
	defer srv.Close()
	ctx, rec := WithRecorder(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
	resp, err := (&http.Client{Transport: NewTransport(nil)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != big {
		t.Errorf("body of %d bytes came back as %d", len(big), len(b))
	}
	if f := rec.Facts(); f.HTTPStatus != 200 || f.HasJSONRPCCode {
		t.Errorf("facts %+v", f)
	}
}

func BenchmarkTransport(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}`)
	}))
	defer srv.Close()
	for _, recorded := range []bool{false, true} {
		b.Run(fmt.Sprintf("recorder=%v", recorded), func(b *testing.B) {
			hc := &http.Client{Transport: NewTransport(http.DefaultTransport.(*http.Transport).Clone())}
			for b.Loop() {
				ctx := context.Background()
				if recorded {
					ctx, _ = WithRecorder(ctx)
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
				resp, err := hc.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// Over the SSE transport the POST carries the HTTP status; the response
// itself arrives on the event stream.
func TestTransportRecordsFactsOverSSE(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	srv.Config.Handler = faultHandler(t, server.NewSSEServer(toolServer(), server.WithBaseURL(base)))
	srv.Start()
	defer srv.Close()

	tests := []struct {
		tool   string
		class  string
		status int
	}{
		{"ok", "", 0},
		{"iserror", ClassToolError, 0},
		{"html502", ClassHTTP, 502},
		{"json503", ClassHTTP, 503},
		{"unauth", ClassAuth, 401},
	}
	hc := &http.Client{Transport: NewTransport(http.DefaultTransport.(*http.Transport).Clone())}
	tr, err := transport.NewSSE(base+"/sse", transport.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	if err := c.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			callCtx, rec := WithRecorder(ctx)
			req := mcp.CallToolRequest{}
			req.Params.Name = tt.tool
			res, err := c.CallTool(callCtx, req)
			f := rec.Facts()
			got := Classify(Input{Result: res, Err: err, Facts: f, Transport: TransportSSE})
			if got.Class != tt.class || got.HTTPStatus != tt.status {
				t.Fatalf("Classify = %+v (err %v, facts %+v), want %s/%d", got, err, f, tt.class, tt.status)
			}
			if !f.Dispatched || f.HTTPStatus == 0 {
				t.Errorf("POST not recorded: %+v", f)
			}
		})
	}
}
