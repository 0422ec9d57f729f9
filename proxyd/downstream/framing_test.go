package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// prettyBackend answers a call on an SSE stream whose messages hold line
// breaks between their tokens, as an upstream that pretty-prints (or a
// multi-line data field, joined) gives them.
type prettyBackend struct{ hintBackend }

func (prettyBackend) Relay(_ context.Context, c *Call) (json.RawMessage, error) {
	c.Peer.Notify("notifications/progress", json.RawMessage("{\n  \"progressToken\": "+string(c.ProgressToken)+",\r\n  \"progress\": 1\r}"))
	return json.RawMessage("{\n  \"content\": [\r\n    {\"type\": \"text\", \"text\": \"line\\nbreaks\"}\r  ]\n\n}"), nil
}

// An SSE answer reaches the client whole however its messages break
// their lines: each line is a data line of its own, which the client's
// parser joins again.
func TestSSEEventsWithLineBreaks(t *testing.T) {
	const token = testToken
	_, srv := startEndpoint(t, prettyBackend{})
	for _, version := range []string{mcp.ProtocolVersion20251125, mcp.LATEST_PROTOCOL_VERSION} {
		t.Run(version, func(t *testing.T) {
			tr, err := transport.NewStreamableHTTP(srv.URL+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
			if err != nil {
				t.Fatal(err)
			}
			cl := client.NewClient(tr, client.WithProtocolVersion(version))
			t.Cleanup(func() { _ = cl.Close() })
			var progress atomic.Int64
			cl.OnNotification(func(n mcp.JSONRPCNotification) {
				if n.Method == "notifications/progress" {
					progress.Add(1)
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := cl.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := cl.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "framing-test", Version: "0"}}}); err != nil {
				t.Fatal(err)
			}
			req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}, Meta: &mcp.Meta{ProgressToken: "p1"}}}
			res, err := cl.CallTool(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if tc, ok := res.Content[0].(mcp.TextContent); !ok || tc.Text != "line\nbreaks" {
				t.Fatalf("result %+v", res.Content)
			}
			if progress.Load() != 1 {
				t.Errorf("%d progress notifications, want 1", progress.Load())
			}
		})
	}
}

func TestAppendEvent(t *testing.T) {
	tests := []struct{ msg, want string }{
		{`{"a":1}`, "event: message\ndata: {\"a\":1}\n\n"},
		{"{\n\"a\":1}", "event: message\ndata: {\ndata: \"a\":1}\n\n"},
		{"{\r\n\"a\":1\r}", "event: message\ndata: {\ndata: \"a\":1\ndata: }\n\n"},
		{"{\n\n}", "event: message\ndata: {\ndata: \ndata: }\n\n"},
		{"{}\n", "event: message\ndata: {}\ndata: \n\n"},
	}
	for _, tt := range tests {
		if got := string(appendEvent(nil, []byte(tt.msg))); got != tt.want {
			t.Errorf("appendEvent(%q) = %q, want %q", tt.msg, got, tt.want)
		}
		// Joined again as an SSE parser does, the data is the message.
		var data [][]byte
		for _, line := range bytes.Split([]byte(tt.want), []byte("\n")) {
			if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				data = append(data, d)
			}
		}
		if joined := string(bytes.Join(data, []byte("\n"))); joined != normalizeBreaks(tt.msg) {
			t.Errorf("%q: the data lines join to %q", tt.msg, joined)
		}
	}
}

// normalizeBreaks is s with CRLF and CR as LF, as an SSE parser reads
// line ends.
func normalizeBreaks(s string) string {
	b := bytes.ReplaceAll([]byte(s), []byte("\r\n"), []byte("\n"))
	return string(bytes.ReplaceAll(b, []byte("\r"), []byte("\n")))
}
