package upstream

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// What the upstream's answer to a relayed call may hold: a message that
// is not JSON-RPC fails the call naming why (in a JSON body) or is
// skipped (on an event stream, as the MCP library skips it); a null
// method is no method.
func TestUpstreamMessageShapes(t *testing.T) {
	const result = `"result":{"content":[{"type":"text","text":"fine"}]}`
	tests := []struct {
		name, ctype, body string // body: %ID% is the request's id
		wantErr           string // "" for the call to succeed
	}{
		{"invalid JSON", "application/json", `{"jsonrpc":"2.0","id":%ID%,` + result, "the upstream sent invalid JSON"},
		{"batch", "application/json", `[{"jsonrpc":"2.0","id":%ID%,` + result + `}]`, "the upstream sent a JSON-RPC batch"},
		{"not an object", "application/json", `"fine"`, "the upstream sent JSON that is not a JSON-RPC message: not an object"},
		{"method a number", "application/json", `{"jsonrpc":"2.0","id":%ID%,"method":5,` + result + `}`,
			"the upstream sent JSON that is not a JSON-RPC message: method is a number, not a string"},
		{"jsonrpc a number", "application/json", `{"jsonrpc":2,"id":%ID%,` + result + `}`,
			"the upstream sent JSON that is not a JSON-RPC message: jsonrpc is a number, not a string"},
		{"method null", "application/json", `{"jsonrpc":"2.0","id":%ID%,"method":null,` + result + `}`, ""},
		{"stream skips what is not JSON-RPC", "text/event-stream", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":5}\n\n" +
			"event: message\ndata: [1]\n\n" +
			"event: message\ndata: {\"jsonrpc\":2,\"method\":\"notifications/message\",\"params\":{}}\n\n" +
			"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%ID%,\"method\":null," + result + "}\n\n", ""},
	}
	fx := startFixture(t, mcpserver.EraLegacy)
	target, err := url.Parse(fx.URL())
	if err != nil {
		t.Fatal(err)
	}
	pass := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		msg, err := relay.ParseMessage(b)
		args, _ := relay.Member(msg.Params, "arguments")
		text := relay.StringMember(args, "text")
		if err != nil || msg.Method != "tools/call" || !strings.HasPrefix(text, "shape ") {
			pass.ServeHTTP(w, r)
			return
		}
		for _, tt := range tests {
			if tt.name == strings.TrimPrefix(text, "shape ") {
				w.Header().Set("Content-Type", tt.ctype)
				_, _ = io.WriteString(w, strings.ReplaceAll(tt.body, "%ID%", string(msg.ID)))
				return
			}
		}
		http.Error(w, "no such shape", http.StatusBadRequest)
	}))
	t.Cleanup(front.Close) // after the manager's cleanup has closed its streams

	m := newManager(t, config.Server{Name: "fx", URL: front.URL + target.Path, Protocol: config.ProtocolLegacy})
	c, _ := m.Get("fx")
	waitState(t, c, api.StateReady)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := c.CallTool(ctx, mcpserver.ToolEcho, []byte(`{"text":"shape `+tt.name+`"}`))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("the call failed: %v", err)
			case tt.wantErr == "" && !bytes.Contains(res.Raw, []byte("fine")):
				t.Fatalf("result %s, want the upstream's", res.Raw)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
			}
		})
	}
}
