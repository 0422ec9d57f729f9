package downstream

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// The endpoint's edges: the Bearer scheme in any case (RFC 7235), no
// stream outside the endpoint path, and a batch told that batches are not
// supported rather than that its JSON is invalid.
func TestEndpointEdges(t *testing.T) {
	const token = testToken
	_, srv := startEndpoint(t, hintBackend{})
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	cases := []struct {
		name, method, path, auth, body string
		want                           int
		wantBody                       string
	}{
		{"Bearer", http.MethodPost, "/mcp", "Bearer " + token, initialize, http.StatusOK, ""},
		{"bearer in lower case", http.MethodPost, "/mcp", "bearer " + token, initialize, http.StatusOK, ""},
		{"BEARER with spaces", http.MethodPost, "/mcp", "BEARER   " + token, initialize, http.StatusOK, ""},
		{"wrong token", http.MethodPost, "/mcp", "Bearer x" + token, initialize, http.StatusUnauthorized, ""},
		{"other scheme", http.MethodPost, "/mcp", "Basic " + token, initialize, http.StatusUnauthorized, ""},
		{"GET elsewhere", http.MethodGet, "/other", "Bearer " + token, "", http.StatusNotFound, "/mcp"},
		{"POST elsewhere", http.MethodPost, "/mcp/x", "Bearer " + token, initialize, http.StatusNotFound, "/mcp"},
		{"batch", http.MethodPost, "/mcp", "Bearer " + token, " [" + initialize + "]", http.StatusBadRequest, "batch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, c.method, srv.URL+c.path, strings.NewReader(c.body))
			req.Header.Set("Authorization", c.auth)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			if resp.StatusCode != c.want || !strings.Contains(string(b), c.wantBody) {
				t.Fatalf("status %d: %s; want %d containing %q", resp.StatusCode, b, c.want, c.wantBody)
			}
			if c.name == "batch" {
				var msg struct {
					Error struct{ Code int } `json:"error"`
				}
				if json.Unmarshal(b, &msg) != nil || msg.Error.Code != -32600 {
					t.Fatalf("want a JSON-RPC invalid-request error, got %s", b)
				}
			}
		})
	}
}

// A literal upstream name equal to the hashed exposed name of another tool
// does not take it silently: one is left out, and the omission says why.
func TestLiteralNameCollidingWithHashedName(t *testing.T) {
	hashed := ExposedName("docs", "docs__", "a b") // "docs__a_b-xxxxxx"
	literal := strings.TrimPrefix(hashed, "docs__")
	for _, order := range [][]string{{"a b", literal}, {literal, "a b"}} {
		u := Upstream{Name: "docs", Prefix: "docs__"}
		for _, n := range order {
			u.Tools = append(u.Tools, toolsOf(mcp.NewTool(n))...)
		}
		n := Name([]Upstream{u})
		if len(n.Tools) != 1 || len(n.Omitted) != 1 {
			t.Fatalf("order %q: %d exposed, %d omitted; want 1 and 1", order, len(n.Tools), len(n.Omitted))
		}
		if msg := n.OmittedBy("docs"); len(msg) != 1 || !strings.Contains(msg[0], hashed) {
			t.Fatalf("order %q: omission %q does not name %s", order, msg, hashed)
		}
	}
}
