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
			s, counter, upURL := subscribableUpstream(t, "test://gone")
			td := startDaemon(t, "listen: 127.0.0.1:0\nservers:\n  - name: up\n    url: "+upURL+"\n    protocol: legacy\n")
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

// subscribableUpstream starts an upstream (legacy, its own sessions) that
// lists the resource uri and counts the methods it is sent.
func subscribableUpstream(t *testing.T, uri string) (*server.MCPServer, *methodCounter, string) {
	t.Helper()
	s := server.NewMCPServer("subscriptions", "1.0.0", server.WithResourceCapabilities(true, true), server.WithLogging())
	s.AddResource(mcp.NewResource(uri, "resource", mcp.WithMIMEType("text/plain")), func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Text: "contents"}}, nil
	})
	counter := &methodCounter{seen: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: counter.wrap(server.NewStreamableHTTPServer(s, server.WithStateful(true))), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return s, counter, "http://" + ln.Addr().String() + "/mcp"
}

// Two servers list the same URI: the first listed serves it, and a
// client subscribed to it hears the updates of that server alone, not
// of the other that lists it too. When the first stops listing it, a
// subscribe moves the subscription to the server that serves it now.
func TestResourceUpdatesFromTheSubscribedServer(t *testing.T) {
	const uri = "test://shared"
	a, aCount, aURL := subscribableUpstream(t, uri)
	b, bCount, bURL := subscribableUpstream(t, uri)
	td := startDaemon(t, "listen: 127.0.0.1:0\nservers:\n"+
		"  - name: a\n    url: "+aURL+"\n    protocol: legacy\n"+
		"  - name: b\n    url: "+bURL+"\n    protocol: legacy\n")
	waitReady(t, td, "a")
	waitReady(t, td, "b")
	c := dialRelay(t, td, mcp.ProtocolVersion20251125)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The log messages below mark how far each upstream's stream has
	// been relayed.
	//lint:ignore SA1019 logging is relayed to legacy clients
	if err := c.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelInfo}}); err != nil {
		t.Fatal(err)
	}
	subscribe := func() {
		t.Helper()
		//lint:ignore SA1019 the legacy era's resources/subscribe is what is tested
		if err := c.Subscribe(ctx, mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: uri}}); err != nil {
			t.Fatal(err)
		}
	}
	updated := func() int { return len(c.notifications(mcp.MethodNotificationResourceUpdated)) }
	// from has s send an update of uri and then a log message: the
	// message, relayed after the update on the same upstream stream, shows
	// the update has been through proxyd.
	from := func(s *server.MCPServer, marker string) {
		t.Helper()
		s.SendNotificationToAllClients(mcp.MethodNotificationResourceUpdated, map[string]any{"uri": uri})
		s.SendNotificationToAllClients(string(mcp.MethodNotificationMessage), map[string]any{"level": "info", "data": marker})
		waitfor.True(t, 10*time.Second, "the log message "+marker, func() bool {
			for _, n := range c.notifications(string(mcp.MethodNotificationMessage)) {
				if n.Params.AdditionalFields["data"] == marker {
					return true
				}
			}
			return false
		})
	}

	subscribe()
	if aCount.count("resources/subscribe") != 1 || bCount.count("resources/subscribe") != 0 {
		t.Fatalf("subscribes a=%d b=%d, want a=1 b=0", aCount.count("resources/subscribe"), bCount.count("resources/subscribe"))
	}
	from(b, "b-1")
	if n := updated(); n != 0 {
		t.Fatalf("the client heard %d updates from b, which it did not subscribe to", n)
	}
	from(a, "a-1")
	if n := updated(); n != 1 {
		t.Fatalf("the client heard %d updates from a, want 1", n)
	}

	// a stops listing the URI: b serves it now, and subscribing again
	// moves the subscription there.
	a.DeleteResources(uri)
	waitfor.Cond(t, 20*time.Second, "b to serve "+uri, func() (bool, string) {
		res, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
		if err != nil {
			return false, err.Error()
		}
		return bCount.count("resources/read") > 0, fmt.Sprintf("%+v", res)
	})
	subscribe()
	if aCount.count("resources/unsubscribe") != 1 || bCount.count("resources/subscribe") != 1 {
		t.Fatalf("a unsubscribes %d, b subscribes %d, want 1 and 1", aCount.count("resources/unsubscribe"), bCount.count("resources/subscribe"))
	}
	from(a, "a-2")
	from(b, "b-2")
	if n := updated(); n != 2 {
		t.Fatalf("the client heard %d updates in all, want 2 (a's first, b's after the move)", n)
	}
}
