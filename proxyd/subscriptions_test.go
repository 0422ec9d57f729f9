package proxyd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/internal/waitfor"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// methodCounter counts the JSON-RPC methods an upstream was sent.
type methodCounter struct {
	mu   sync.Mutex
	seen map[string]int
}

func (m *methodCounter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var msg struct{ Method string }
			if json.Unmarshal(body, &msg) == nil && msg.Method != "" {
				m.mu.Lock()
				m.seen[msg.Method]++
				m.mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}

func (m *methodCounter) count(method string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen[method]
}

// A legacy session's subscription is ended on the server it was made
// with, by an unsubscribe or by the session's end, even once that server
// no longer lists the URI (its list changed, or it is not ready): the
// session hears no more of it, and proxyd's upstream subscription, held
// for all its clients, is released rather than kept until proxyd stops.
func TestSubscriptionEndsOnItsServer(t *testing.T) {
	for _, tt := range []struct {
		name string
		end  func(t *testing.T, url, token, sid string)
	}{
		{"unsubscribe", func(t *testing.T, url, token, sid string) {
			_, body := legacyPost(t, url, token)(sid, `{"jsonrpc":"2.0","id":4,"method":"resources/unsubscribe","params":{"uri":"test://gone"}}`)
			if !strings.Contains(body, `"result":{}`) {
				t.Fatalf("unsubscribe: %s", body)
			}
		}},
		{"session ends", func(t *testing.T, url, token, sid string) {
			req := legacyRequest(url, token, sid, "")
			req.Method = http.MethodDelete
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("DELETE: %s", resp.Status)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := server.NewMCPServer("subscriptions", "1.0.0", server.WithResourceCapabilities(true, true))
			s.AddResource(mcp.NewResource("test://gone", "gone", mcp.WithMIMEType("text/plain")), func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
				return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Text: "soon gone"}}, nil
			})
			counter := &methodCounter{seen: map[string]int{}}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			hs := &http.Server{Handler: counter.wrap(server.NewStreamableHTTPServer(s, server.WithStateful(true))), ReadHeaderTimeout: 5 * time.Second}
			go func() { _ = hs.Serve(ln) }()
			t.Cleanup(func() { _ = hs.Close() })

			td := startDaemon(t, "listen: 127.0.0.1:0\nservers:\n  - name: up\n    url: http://"+ln.Addr().String()+"/mcp\n    protocol: legacy\n")
			waitReady(t, td, "up")
			url, token := endpoint(t, td)
			post, sid := legacySession(t, url, token)
			if _, body := post(sid, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"test://gone"}}`); !strings.Contains(body, `"result":{}`) {
				t.Fatalf("subscribe: %s", body)
			}
			if n := counter.count("resources/subscribe"); n != 1 {
				t.Fatalf("the upstream got %d resources/subscribe, want 1", n)
			}

			// The upstream drops the resource from its list and says so.
			s.DeleteResources("test://gone")
			waitfor.Cond(t, 20*time.Second, "proxyd to withdraw test://gone", func() (bool, string) {
				_, body := post(sid, `{"jsonrpc":"2.0","id":3,"method":"resources/list","params":{}}`)
				return !strings.Contains(body, "test://gone"), body
			})

			tt.end(t, url, token, sid)
			waitfor.Cond(t, 20*time.Second, "the upstream's resources/unsubscribe", func() (bool, string) {
				n := counter.count("resources/unsubscribe")
				return n == 1, fmt.Sprintf("%d resources/unsubscribe", n)
			})
		})
	}
}
