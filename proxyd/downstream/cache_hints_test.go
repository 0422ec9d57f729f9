package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// hintBackend is one upstream with a tool, a prompt, a resource and a
// template, enough for every listing to have something in it.
type hintBackend struct{}

func (hintBackend) Upstreams() []Upstream {
	return []Upstream{{
		Name:      "alpha",
		Tools:     toolsOf(mcp.NewTool("echo", mcp.WithString("text"))),
		Prompts:   []mcp.Prompt{mcp.NewPrompt("greet")},
		Resources: []mcp.Resource{mcp.NewResource("file:///alpha/readme.txt", "readme", mcp.WithMIMEType("text/plain"))},
		Templates: []mcp.ResourceTemplate{mcp.NewResourceTemplate("file:///alpha/{name}", "files")},
	}}
}

func (hintBackend) CallTool(context.Context, string, string, json.RawMessage, CallMeta) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultText("ok"), nil
}

func (hintBackend) GetPrompt(context.Context, string, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	return nil, errors.New("not used")
}

func (hintBackend) ReadResource(_ context.Context, _ string, req mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{
		mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Text: "hello"},
	}}, nil
}

// resultRecorder keeps the raw JSON-RPC result of each request method the
// client sent, so the test sees the fields exactly as they went over the
// wire (typed results could hide or default them).
type resultRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	raw  map[string]json.RawMessage
}

func (r *resultRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var method string
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &msg)
		method = msg.Method
	}
	resp, err := r.next.RoundTrip(req)
	if err != nil || method == "" {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if result := findResult(body); result != nil {
		r.mu.Lock()
		r.raw[method] = result
		r.mu.Unlock()
	}
	return resp, nil
}

// findResult returns the result of a JSON or SSE response body.
func findResult(body []byte) json.RawMessage {
	candidates := [][]byte{bytes.TrimSpace(body)}
	for _, line := range bytes.Split(body, []byte("\n")) {
		if data, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data:")); ok {
			candidates = append(candidates, bytes.TrimSpace(data))
		}
	}
	for _, c := range candidates {
		var msg struct {
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(c, &msg) == nil && len(msg.Result) > 0 {
			return msg.Result
		}
	}
	return nil
}

func TestCacheHintsOnModernListings(t *testing.T) {
	s := New(hintBackend{}, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.Sync()
	srv := httptest.NewServer(s.Handler("", ""))
	t.Cleanup(srv.Close)

	rec := &resultRecorder{next: http.DefaultTransport, raw: map[string]json.RawMessage{}}
	tr, err := transport.NewStreamableHTTP(srv.URL+"/mcp", transport.WithHTTPBasicClient(&http.Client{Transport: rec}))
	if err != nil {
		t.Fatal(err)
	}
	cl := client.NewClient(tr)
	t.Cleanup(func() { _ = cl.Close() })
	ctx := context.Background()
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "cache-hints-test", Version: "0"}}}); err != nil {
		t.Fatal(err)
	}
	if !mcp.IsModernProtocol(cl.ProtocolVersion()) {
		t.Fatalf("negotiated %s; the hints are emitted only in the modern era", cl.ProtocolVersion())
	}
	if _, err := cl.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ListPrompts(ctx, mcp.ListPromptsRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ListResources(ctx, mcp.ListResourcesRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{}); err != nil {
		t.Fatal(err)
	}
	read := mcp.ReadResourceRequest{}
	read.Params.URI = "file:///alpha/readme.txt"
	if _, err := cl.ReadResource(ctx, read); err != nil {
		t.Fatal(err)
	}

	methods := []mcp.MCPMethod{mcp.MethodServerDiscover, mcp.MethodToolsList, mcp.MethodPromptsList,
		mcp.MethodResourcesList, mcp.MethodResourcesTemplatesList, mcp.MethodResourcesRead}
	for _, m := range methods {
		t.Run(string(m), func(t *testing.T) {
			rec.mu.Lock()
			raw, ok := rec.raw[string(m)]
			rec.mu.Unlock()
			if !ok {
				t.Fatalf("no result recorded for %s", m)
			}
			var hints struct {
				TTLMs      *int64 `json:"ttlMs"`
				CacheScope string `json:"cacheScope"`
			}
			if err := json.Unmarshal(raw, &hints); err != nil {
				t.Fatal(err)
			}
			if hints.CacheScope != string(mcp.CacheScopePrivate) {
				t.Errorf("cacheScope %q, want private (result %s)", hints.CacheScope, abbreviate(raw))
			}
			if hints.TTLMs == nil || *hints.TTLMs != CacheTTLMillis {
				t.Errorf("ttlMs %v, want %d (result %s)", hints.TTLMs, CacheTTLMillis, abbreviate(raw))
			}
		})
	}
}

func abbreviate(b []byte) string {
	s := string(b)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strings.TrimSpace(s)
}
