package proxyd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/conformance"
	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/procs"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
)

// rawClient posts JSON-RPC messages to proxyd's endpoint the way a plain
// HTTP client does, in either era, and reads the JSON or SSE answer whole.
type rawClient struct {
	t      testing.TB
	url    string
	token  string
	hc     *http.Client
	modern bool
	sid    string // legacy session
}

func newRawClient(t testing.TB, td *testDaemon, modern bool) *rawClient {
	t.Helper()
	url, token := endpoint(t, td)
	c := &rawClient{t: t, url: url, token: token, modern: modern,
		hc: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	t.Cleanup(c.hc.CloseIdleConnections)
	if !modern {
		resp, body := c.post("initialize", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"stress","version":"1"}}}`, "")
		c.sid = resp.Header.Get("Mcp-Session-Id")
		if c.sid == "" {
			t.Fatalf("initialize: no session (%d %s)", resp.StatusCode, body)
		}
		c.post("", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "")
	}
	return c
}

// call sends one request; params get the era's _meta (and a progress
// token when given).
func (c *rawClient) call(id int, method, name, params, progressToken string) (*http.Response, []byte) {
	meta := map[string]any{}
	if progressToken != "" {
		meta["progressToken"] = progressToken
	}
	if c.modern {
		meta["io.modelcontextprotocol/protocolVersion"] = "2026-07-28"
		meta["io.modelcontextprotocol/clientCapabilities"] = map[string]any{}
		meta["io.modelcontextprotocol/logLevel"] = "debug"
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(params), &p); err != nil {
		c.t.Fatal(err)
	}
	p["_meta"] = meta
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": p})
	return c.post(method, string(b), name)
}

func (c *rawClient) post(method, body, name string) (*http.Response, []byte) {
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.token)
	if c.modern {
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
	} else if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Errorf("%s: %v", method, err)
		return &http.Response{Header: http.Header{}}, nil
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Errorf("%s: reading the answer: %v (read so far: %q)", method, err, out)
	}
	return resp, out
}

// messages are the JSON-RPC messages of an answer: the body, or each SSE
// event's data.
func messages(resp *http.Response, body []byte) []map[string]any {
	var out []map[string]any
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m map[string]any
		if json.Unmarshal(body, &m) == nil {
			out = append(out, m)
		}
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m map[string]any
			if json.Unmarshal([]byte(data), &m) == nil {
				out = append(out, m)
			}
		}
	}
	return out
}

// TestRelayStreamsComplete calls the progress and logging tools of the
// conformance fixture in every era combination: each answer carries every
// notification the tool sent, in order, and ends with the result. Progress
// calls run many at once (their notifications find the call by token
// wherever they arrive); log messages carry nothing that names their call,
// so those calls run one at a time. A legacy upstream built on the MCP
// library sends some of a call's messages on its GET stream rather than
// the call's own (a SHOULD of the spec it breaks), and nothing orders two
// streams: there, each message that reaches the call comes before the
// result, but a late one may miss it.
func TestRelayStreamsComplete(t *testing.T) {
	fx, err := conformance.Start(conformance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fx.Close() })
	td := startDaemon(t, fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: l\n    url: %s\n    protocol: legacy\n    prefix: l_\n  - name: m\n    url: %s\n    protocol: modern\n    prefix: m_\n", fx.URL(), fx.URL()))
	waitReady(t, td, "l")
	waitReady(t, td, "m")
	eras := map[string]string{"l": "legacy", "m": "modern"}
	for _, client := range []string{"legacy", "modern"} {
		for _, up := range []string{"l", "m"} {
			t.Run(client+"-client/"+eras[up]+"-upstream", func(t *testing.T) {
				c := newRawClient(t, td, client == "modern")
				if client == "legacy" {
					c.post("logging/setLevel", `{"jsonrpc":"2.0","id":0,"method":"logging/setLevel","params":{"level":"debug"}}`, "")
				}
				for _, tool := range []struct {
					name, notification string
					parallel, rounds   int
				}{{"test_tool_with_progress", "notifications/progress", 12, 3}, {"test_tool_with_logging", "notifications/message", 1, 10}} {
					name := up + "_" + tool.name
					for round := 0; round < tool.rounds && !t.Failed(); round++ {
						var wg sync.WaitGroup
						for i := 0; i < tool.parallel; i++ {
							wg.Add(1)
							go func(id int) {
								defer wg.Done()
								resp, body := c.call(id, "tools/call", name, `{"name":"`+name+`","arguments":{}}`, fmt.Sprintf("tok-%d", id))
								want := 3
								if up == "l" && tool.name == "test_tool_with_logging" {
									want = -3 // up to three
								}
								checkStream(t, tool.name, resp, body, id, tool.notification, want)
							}(round*100 + i + 1)
						}
						wg.Wait()
					}
				}
			})
		}
	}
}

// checkStream: want notifications named method (-want: 1 to want), then
// the response to id, and nothing after it.
func checkStream(t *testing.T, tool string, resp *http.Response, body []byte, id int, method string, want int) {
	t.Helper()
	msgs := messages(resp, body)
	seen, result := 0, -1
	for i, m := range msgs {
		switch {
		case m["method"] == method:
			seen++
			if result >= 0 {
				t.Errorf("%s (id %d): %s after the result: %s", tool, id, method, body)
			}
		case m["id"] != nil && fmt.Sprint(m["id"]) == fmt.Sprint(id):
			result = i
			if m["result"] == nil {
				t.Errorf("%s (id %d): an error: %s", tool, id, body)
			}
		}
	}
	if result < 0 {
		t.Errorf("%s (id %d): the answer ended without the response (HTTP %d, %s): %q", tool, id, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		return
	}
	if want < 0 && seen >= 1 && seen <= -want {
		return
	}
	if seen != want {
		t.Errorf("%s (id %d): %d %s before the result, want %d: %s", tool, id, seen, method, want, body)
	}
}

// handlersIn counts the goroutines whose stack holds fn (a function name
// as the runtime prints it).
func handlersIn(fn string) int {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
	return strings.Count(buf.String(), fn+"(")
}

// TestListenStreamsEndWithTheirClients opens subscriptions/listen streams
// the ways a modern client does (list changes, resource updates on either
// upstream, nothing proxyd can give), holds them, and leaves: closing the
// connection after the acknowledgement, before any answer, or mid-way
// through the first event. Every handler ends, and proxyd's upstream
// listen streams are back to the one each modern upstream always has.
func TestListenStreamsEndWithTheirClients(t *testing.T) {
	fx, err := conformance.Start(conformance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fx.Close() })
	td := startDaemon(t, fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: l\n    url: %s\n    protocol: legacy\n    prefix: \"\"\n  - name: m\n    url: %s\n    protocol: modern\n    prefix: m_\n", fx.URL(), fx.URL()))
	waitReady(t, td, "l")
	waitReady(t, td, "m")
	url, token := endpoint(t, td)
	const (
		listenFn   = "github.com/mcpx-dev/mcpx/proxyd/downstream.(*Server).listen"
		upstreamFn = "github.com/mark3labs/mcp-go/server.(*StreamableHTTPServer).handlePost"
	)
	// proxyd holds one listen stream on its modern upstream (m); it may
	// open it just after the server reports ready.
	const baseline = 1
	waitfor.Cond(t, 10*time.Second, "proxyd's own listen stream on the modern upstream", func() (bool, string) {
		n := handlersIn(upstreamFn)
		return n == baseline, fmt.Sprintf("the upstream serves %d streams, want %d", n, baseline)
	})
	filters := []string{
		`{"toolsListChanged":true,"promptsListChanged":true}`,
		`{"resourceSubscriptions":["test://watched-resource"]}`,
		`{"resourcesListChanged":true,"resourceSubscriptions":["test://watched-resource","test://static-text"]}`,
	}
	type stream struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	var streams []stream
	id := 0
	open := func(filter, leave string) stream {
		id++
		ctx, cancel := context.WithCancel(context.Background())
		st := stream{cancel: cancel, done: make(chan struct{})}
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"notifications":%s,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, id, filter)
		if leave == "before-answer" {
			// Gone as soon as the request is out.
			ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { cancel() }})
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "subscriptions/listen")
		acked := make(chan struct{})
		go func() {
			defer close(st.done)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				close(acked)
				return
			}
			defer resp.Body.Close()
			r := bufio.NewReader(resp.Body)
			if leave == "mid-event" {
				_, _ = r.ReadString('\n') // "event: message", not yet its data
				close(acked)
				<-ctx.Done()
				return
			}
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					close(acked)
					return
				}
				if strings.Contains(line, "notifications/subscriptions/acknowledged") {
					close(acked)
					_, _ = io.Copy(io.Discard, r) // until the client leaves
					return
				}
			}
		}()
		<-acked
		return st
	}
	for _, f := range filters {
		for _, leave := range []string{"after-ack", "before-answer", "mid-event"} {
			streams = append(streams, open(f, leave))
		}
	}
	held := 2 * len(filters) // after-ack and mid-event streams stay open
	waitfor.Cond(t, 10*time.Second, "the open listen streams to be served", func() (bool, string) {
		n := handlersIn(listenFn)
		return n == held, fmt.Sprintf("%d listen handlers, want %d", n, held)
	})
	// An open listen stream is not a request in flight: the activity
	// writer, while calls come one at a time, waits for moments without
	// one (procs.WaitQuiet).
	inFlight := func() (bool, string) {
		requests, calls := procs.InFlight()
		return requests == 0 && calls == 0, fmt.Sprintf("%d requests and %d calls in flight, want none", requests, calls)
	}
	waitfor.Cond(t, 10*time.Second, "no request in flight with only listen streams open", inFlight)
	for _, st := range streams {
		st.cancel()
		<-st.done
	}
	waitfor.Cond(t, 10*time.Second, "every listen handler to end after its client left", func() (bool, string) {
		n := handlersIn(listenFn)
		return n == 0, fmt.Sprintf("%d listen handlers still running", n)
	})
	waitfor.Cond(t, 10*time.Second, "no request in flight once the streams ended", inFlight)
	waitfor.Cond(t, 10*time.Second, "proxyd's upstream listen streams to be back to one per modern upstream", func() (bool, string) {
		n := handlersIn(upstreamFn)
		return n == baseline, fmt.Sprintf("the upstream serves %d streams, want %d", n, baseline)
	})
}

// TestStandingStreamProgressRelayed: a legacy upstream built on the MCP
// library may send a call's progress on proxyd's standing GET stream
// rather than the call's answer, and proxyd may read the call's result
// first. A notification the upstream wrote before the result still
// reaches the client before it (the fixture's progress tool returns only
// once its notification is flushed), in both client eras, over plain
// HTTP and over TLS to a server offering HTTP/2 (one connection for all
// streams, where nothing could tell the GET stream's bytes from the
// calls'; proxyd speaks HTTP/1.1 to a legacy upstream).
func TestStandingStreamProgressRelayed(t *testing.T) {
	fx := mcpserver.New(mcpserver.Options{Era: mcpserver.EraBoth})
	plain := httptest.NewServer(fx.Handler())
	t.Cleanup(plain.Close)
	tls := httptest.NewUnstartedServer(fx.Handler())
	tls.EnableHTTP2 = true
	tls.StartTLS()
	t.Cleanup(tls.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tls.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	td := startDaemon(t, fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: plain\n    url: %s\n    protocol: legacy\n  - name: tls\n    url: %s\n    protocol: legacy\n    tls:\n      ca_file: %s\n", plain.URL+mcpserver.EndpointPath, tls.URL+mcpserver.EndpointPath, ca))
	waitReady(t, td, "plain")
	waitReady(t, td, "tls")
	const calls = 200
	for _, server := range []string{"plain", "tls"} {
		for _, modern := range []bool{false, true} {
			t.Run(server+"/"+map[bool]string{false: "legacy-client", true: "modern-client"}[modern], func(t *testing.T) {
				c := newRawClient(t, td, modern)
				tool := server + "__progress"
				missed := 0
				for id := 1; id <= calls; id++ {
					resp, body := c.call(id, "tools/call", tool, `{"name":"`+tool+`","arguments":{"text":"x"}}`, fmt.Sprintf("tok-%d", id))
					msgs := messages(resp, body)
					if len(msgs) == 0 || msgs[len(msgs)-1]["result"] == nil {
						t.Fatalf("call %d: no result: %s", id, body)
					}
					notified := false
					for _, m := range msgs[:len(msgs)-1] {
						notified = notified || m["method"] == "notifications/progress"
					}
					if !notified {
						missed++
					}
				}
				if missed > 0 {
					t.Errorf("%d of %d answers came without the progress notification the upstream sent before the result", missed, calls)
				}
			})
		}
	}
}

// TestClientStringsReachTheUpstreamAsJSON: what proxyd writes into the
// upstream's request from strings a client sent (a modern client's log
// level) is JSON whatever the string holds, so the upstream reads the
// request and answers it.
func TestClientStringsReachTheUpstreamAsJSON(t *testing.T) {
	fx, err := mcpserver.Start(mcpserver.Options{Era: mcpserver.EraBoth})
	if err != nil {
		t.Fatal(err)
	}
	defer fx.Close()
	td := startDaemon(t, fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: fxm\n    url: %s\n    protocol: modern\n", fx.URL()))
	waitReady(t, td, "fxm")
	c := newRawClient(t, td, true)
	for _, level := range []string{"debug", "de\x01bug", "bell\a", "tab\v"} {
		meta, _ := json.Marshal(map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
			"io.modelcontextprotocol/logLevel":           level,
		})
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fxm__echo","arguments":{"text":"hi"},"_meta":` + string(meta) + `}}`
		resp, out := c.post("tools/call", body, "fxm__echo")
		msgs := messages(resp, out)
		if len(msgs) == 0 || msgs[len(msgs)-1]["result"] == nil {
			t.Errorf("log level %q: the call failed: %d %s", level, resp.StatusCode, out)
		}
	}
}
