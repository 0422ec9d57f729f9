package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/relay"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// recordingHandler is a client that records what the upstream sends and
// answers its requests with canned results.
type recordingHandler struct {
	mu      sync.Mutex
	notes   []string // method plus params
	asked   []string
	accepts map[string]bool
	answer  func(method string, params json.RawMessage) (json.RawMessage, error)
}

func (h *recordingHandler) Notify(method string, params json.RawMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.notes = append(h.notes, method+" "+string(params))
}

func (h *recordingHandler) Accepts(method string) bool { return h.accepts[method] }

func (h *recordingHandler) Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if !h.accepts[method] {
		return nil, relay.Refusal(method)
	}
	h.mu.Lock()
	h.asked = append(h.asked, method)
	h.mu.Unlock()
	if h.answer == nil {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return h.answer(method, params)
}

func (h *recordingHandler) notifications(method string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, n := range h.notes {
		if strings.HasPrefix(n, method+" ") {
			out = append(out, strings.TrimPrefix(n, method+" "))
		}
	}
	return out
}

// everythingStdio configures server-everything as a stdio child.
func everythingStdio(t *testing.T) config.Server {
	t.Helper()
	dir := os.Getenv("MCPX_PEERS_DIR")
	script := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(script); dir == "" || err != nil {
		if os.Getenv("MCPX_REQUIRE_PEERS") == "1" {
			t.Fatalf("server-everything not found under MCPX_PEERS_DIR=%q", dir)
		}
		t.Skip("server-everything not installed (set MCPX_PEERS_DIR, see tools/peers)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not found")
	}
	return config.Server{Name: "everything", Command: node, Args: []string{script}}
}

// everythingTransports name the connections everythingAll makes, one
// per transport.
var everythingTransports = []string{"http", "stdio", "sse"}

// everythingAll connects server-everything over Streamable HTTP, stdio and
// the old HTTP+SSE transport.
func everythingAll(t *testing.T) map[string]*Conn {
	t.Helper()
	m := newManager(t, config.Server{Name: "http", URL: serverEverything(t)}, func() config.Server {
		s := everythingStdio(t)
		s.Name = "stdio"
		return s
	}(), config.Server{Name: "sse", URL: serverEverythingOver(t, "sse", "/sse"), Transport: config.TransportSSE})
	out := map[string]*Conn{}
	for _, name := range everythingTransports {
		c, _ := m.Get(name)
		waitState(t, c, api.StateReady)
		out[name] = c
	}
	return out
}

func callExchange(name string, args string, h Handler, progress bool) *Exchange {
	params, _ := CallParams(name, json.RawMessage(args))
	return &Exchange{Method: string(mcp.MethodToolsCall), Name: name, Params: params, Handler: h, Progress: progress}
}

func TestRelayServerEverything(t *testing.T) {
	conns := everythingAll(t)
	for _, name := range everythingTransports {
		c := conns[name]
		t.Run(name+"/progress", func(t *testing.T) {
			h := &recordingHandler{}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res, err := c.Relay(ctx, callExchange("trigger-long-running-operation", `{"duration":0.2,"steps":2}`, h, true))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(res), "Long running operation completed") {
				t.Fatalf("result %s", res)
			}
			got := h.notifications("notifications/progress")
			if len(got) != 2 {
				t.Fatalf("progress notifications %q, want 2", got)
			}
			for _, p := range got {
				if !strings.Contains(p, `"progressToken":"mcpx-p-`) {
					t.Errorf("progress %s does not carry proxyd's token", p)
				}
			}
		})
		t.Run(name+"/no progress without a token", func(t *testing.T) {
			h := &recordingHandler{}
			if _, err := c.Relay(context.Background(), callExchange("trigger-long-running-operation", `{"duration":0.1,"steps":2}`, h, false)); err != nil {
				t.Fatal(err)
			}
			if got := h.notifications("notifications/progress"); len(got) != 0 {
				t.Fatalf("progress without a token: %q", got)
			}
		})
		t.Run(name+"/elicitation answered", func(t *testing.T) {
			h := &recordingHandler{accepts: map[string]bool{"elicitation/create": true}, answer: func(method string, params json.RawMessage) (json.RawMessage, error) {
				if !strings.Contains(string(params), "requestedSchema") {
					return nil, errors.New("no schema in " + string(params))
				}
				return json.RawMessage(`{"action":"accept","content":{"name":"Ada","check":true,"email":"ada@example.com"}}`), nil
			}}
			res, err := c.Relay(context.Background(), callExchange("trigger-elicitation-request", `{}`, h, false))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(res), "Ada") || len(h.asked) != 1 {
				t.Fatalf("asked %v; result %s", h.asked, res)
			}
		})
		t.Run(name+"/sampling refused without the capability", func(t *testing.T) {
			h := &recordingHandler{}
			res, err := c.Relay(context.Background(), callExchange("trigger-sampling-request", `{"prompt":"hi"}`, h, false))
			// server-everything reports the refused request as a tool error.
			if err != nil || !strings.Contains(string(res), `"isError":true`) || !strings.Contains(string(res), "does not support sampling/createMessage") {
				t.Fatalf("result %s, err %v; want the refusal as a tool error", res, err)
			}
			if len(h.asked) != 0 {
				t.Fatalf("asked %v although the client has no sampling", h.asked)
			}
		})
		t.Run(name+"/sampling answered", func(t *testing.T) {
			h := &recordingHandler{accepts: map[string]bool{"sampling/createMessage": true}, answer: func(string, json.RawMessage) (json.RawMessage, error) {
				return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"sampled-by-test"},"model":"test"}`), nil
			}}
			res, err := c.Relay(context.Background(), callExchange("trigger-sampling-request", `{"prompt":"hi"}`, h, false))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(res), "sampled-by-test") {
				t.Fatalf("result %s", res)
			}
		})
		// A call that runs out its time ends with the deadline's error
		// (the classifier's timeout), whether it was still waiting for the
		// answer or reading its stream.
		for _, progress := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/deadline progress=%v", name, progress), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_, err := c.Relay(ctx, callExchange("trigger-long-running-operation", `{"duration":30,"steps":30}`, &recordingHandler{}, progress))
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("err %v, want the deadline exceeded", err)
				}
			})
		}
		t.Run(name+"/cancelled", func(t *testing.T) {
			h := &recordingHandler{}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := c.Relay(ctx, callExchange("trigger-long-running-operation", `{"duration":30,"steps":30}`, h, true))
				done <- err
			}()
			waitfor.Cond(t, 10*time.Second, "a progress notification", func() (bool, string) {
				return len(h.notifications("notifications/progress")) > 0, ""
			})
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("err %v, want cancelled", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the cancelled call did not return")
			}
		})
	}
}

// A call answered on an SSE stream leaves its connection to the next
// call: the stream's end is read after the response, not cut off (which
// makes the HTTP client drop the connection and dial for every call).
func TestStreamedAnswersReuseTheConnection(t *testing.T) {
	for _, protocol := range []string{config.ProtocolLegacy, config.ProtocolModern} {
		t.Run(protocol, func(t *testing.T) {
			// A server that ends an SSE answer a moment after its
			// response event, as a server may: the stream's end is not in
			// hand when the response is.
			fx := mcpserver.New(mcpserver.Options{})
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fx.Handler().ServeHTTP(w, r)
				if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
					w.(http.Flusher).Flush()
					time.Sleep(20 * time.Millisecond)
				}
			}))
			t.Cleanup(ts.Close)
			m := newManager(t, config.Server{Name: "fx", URL: ts.URL + mcpserver.EndpointPath, Protocol: protocol})
			c, _ := m.Get("fx")
			waitState(t, c, api.StateReady)
			const calls = 20
			for i := range calls {
				pooled := make(chan struct{}, 1)
				var reused atomic.Bool
				ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
					GotConn: func(info httptrace.GotConnInfo) { reused.Store(info.Reused) },
					PutIdleConn: func(err error) {
						if err == nil {
							select {
							case pooled <- struct{}{}:
							default:
							}
						}
					},
				})
				res, err := c.Relay(ctx, callExchange(mcpserver.ToolProgress, `{"text":"hi"}`, &recordingHandler{}, true))
				if err != nil || !strings.Contains(string(res), "hi") {
					t.Fatalf("call %d: %s, %v", i, res, err)
				}
				select {
				case <-pooled:
				case <-time.After(10 * time.Second):
					t.Fatalf("call %d: its connection never went back to the pool (the answer's stream was closed unread)", i)
				}
				if i > 0 && !reused.Load() {
					t.Fatalf("call %d dialled a new connection though the last one went back to the pool", i)
				}
			}
		})
	}
}

// The token and id readers route notifications; they see any valid JSON
// the upstream sends as params (parseMessage has checked the message).
func TestNotificationRoutingKeys(t *testing.T) {
	for _, tc := range []struct {
		params    string
		token, id string
	}{
		{`{"progressToken":"mcpx-p-7","progress":1}`, "mcpx-p-7", ""},
		{`{"progress":1,"progressToken":"a\u00e9b"}`, "aéb", ""},
		{`{"progressToken":7}`, "", ""},
		{`{"progressToken":null}`, "", ""},
		{`{"requestId":"mcpx-e-1","reason":"x"}`, "", "s:mcpx-e-1"},
		{`{"requestId":12}`, "", "n:12"},
		{`{"requestId":null}`, "", ""},
		{`{}`, "", ""},
		{`[1,2]`, "", ""},
		{``, "", ""},
	} {
		if got := progressToken(json.RawMessage(tc.params)); got != tc.token {
			t.Errorf("progressToken(%s) = %q, want %q", tc.params, got, tc.token)
		}
		if got := cancelledID(json.RawMessage(tc.params)); got != tc.id {
			t.Errorf("cancelledID(%s) = %q, want %q", tc.params, got, tc.id)
		}
	}
}
