package proxyd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/syncbuf"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
)

// socketPost posts body to path on the daemon's socket and returns the
// status and body.
func (td *testDaemon) socketPost(t *testing.T, path, body string) (int, string) {
	t.Helper()
	resp, err := td.socketHTTP().Post("http://proxyd.sock"+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Bad input to the control API is refused as such (400 naming the field),
// never turned into something else: an overflowing timeout is not an
// upstream timeout, a negative one is not ignored, trailing data is not
// dropped.
func TestControlAPIRefusesBadInput(t *testing.T) {
	td := startDaemon(t, "")
	cases := []struct {
		name, path, body, want string
	}{
		{"timeout overflows", "/v1/call", `{"tool":"x","timeout_ms":9223372036854775807}`, "timeout_ms"},
		{"timeout negative", "/v1/call", `{"tool":"x","timeout_ms":-5}`, "timeout_ms"},
		{"login timeout overflows", "/v1/login", `{"server":"x","timeout_ms":9223372036854775807}`, "timeout_ms"},
		{"login timeout negative", "/v1/login", `{"server":"x","timeout_ms":-1}`, "timeout_ms"},
		{"probe timeout overflows", "/v1/probe", `{"target":"http://127.0.0.1:1/mcp","timeout_ms":9223372036854775807}`, "timeout"},
		{"trailing data", "/v1/call", `{"tool":"x"} {"tool":"y"}`, "after the JSON"},
		{"trailing garbage", "/v1/probe", `{"target":"http://127.0.0.1:1/mcp"} x`, "after the JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := td.socketPost(t, c.path, c.body)
			if code != http.StatusBadRequest || !strings.Contains(body, c.want) {
				t.Fatalf("status %d: %s; want 400 naming %q", code, body, c.want)
			}
		})
	}
}

// The metrics listener is bounded like the other servers: a keep-alive
// connection is closed after limits.idle_timeout, slow headers after
// limits.read_header_timeout.
func TestMetricsListenerBounded(t *testing.T) {
	td := startDaemon(t, "listen: 127.0.0.1:0\nmetrics_listen: 127.0.0.1:0\nlimits: {idle_timeout: 200ms, read_header_timeout: 200ms}\n")
	st, err := td.client.Status(context.Background())
	if err != nil || st.MetricsListen == "" {
		t.Fatalf("status: %+v, %v", st, err)
	}
	for _, req := range []string{
		"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", // answered, then idle
		"GET /metrics HTTP/1.1\r\nHost: x\r\n",     // headers never finished
	} {
		c, err := net.Dial("tcp", st.MetricsListen)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.Copy(io.Discard, c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("%q: the metrics listener kept the connection open for 10s", req)
		}
	}
}

// A request whose params name the tool twice, or under another case, is
// read by the upstream's decoder as one tool (encoding/json: the last,
// case-insensitively) and could be read by proxyd as another. Whatever
// runs, the activity records that tool (here on a legacy session; on a
// modern request the Mcp-Name header check catches the mismatch).
func TestAmbiguousNamesRecordWhatRuns(t *testing.T) {
	fx, td := withFixture(t, mcpserver.EraLegacy)
	url, token := endpoint(t, td)
	post, sid := legacySession(t, url, token)

	for i, params := range []string{
		`{"name":"fx__echo","arguments":{"text":"a"},"name":"fx__write_note"}`,
		`{"name":"fx__echo","NAME":"fx__write_note","arguments":{"text":"b"}}`,
		`{"name":"fx__echo","n\u0061me":"fx__write_note","arguments":{"text":"c"}}`,
	} {
		before := fx.Executions(mcpserver.ToolWriteNote)
		_, body := post(sid, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i+1)+`,"method":"tools/call","params":`+params+`}`)
		if fx.Executions(mcpserver.ToolEcho) != 0 {
			t.Fatalf("%s: echo ran", params)
		}
		if fx.Executions(mcpserver.ToolWriteNote) != before+1 {
			t.Fatalf("%s: write_note did not run: %s", params, body)
		}
		recs := listActivity(t, td)
		if len(recs) != i+1 || recs[0].Tool != mcpserver.ToolWriteNote {
			t.Fatalf("%s: the record names %q, but write_note ran (%d records)", params, recs[0].Tool, len(recs))
		}
	}
}

// A request that is not valid JSON — nested past encoding/json's limit,
// an unterminated string, a raw control character — is answered at the
// endpoint with a JSON-RPC parse error as the MCP library answers it,
// never sent upstream, and leaves proxyd serving (a validator that
// recursed per level would exhaust the stack on the first).
func TestInvalidJSONAnsweredAndNothingRuns(t *testing.T) {
	fx, td := withFixture(t, mcpserver.EraLegacy)
	url, token := endpoint(t, td)
	post, sid := legacySession(t, url, token)
	call := func(args string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":` + args + `}}`
	}
	const depth = 500_000 // 3 MB, under the 4 MiB request limit
	for name, body := range map[string]string{
		"nested":                call(`{"text":` + strings.Repeat(`{"a":`, depth) + `1` + strings.Repeat(`}`, depth) + `}`),
		"unterminated string":   call(`{"text":"abc}}`),
		"raw control character": call("{\"text\":\"a\x01b\"}"),
	} {
		_, answer := post(sid, body)
		var msg struct {
			Error *struct{ Code int } `json:"error"`
		}
		if err := json.Unmarshal([]byte(answer), &msg); err != nil || msg.Error == nil || msg.Error.Code != -32700 {
			t.Errorf("%s: answer %.200s, want a parse error (-32700)", name, answer)
		}
	}
	if n := fx.Executions(mcpserver.ToolEcho); n != 0 {
		t.Fatalf("echo ran %d times on invalid requests", n)
	}
	// Answered at the endpoint: none of them reached the upstream as a call.
	if recs := listActivity(t, td); len(recs) != 0 {
		t.Fatalf("%d calls recorded for invalid requests: %+v", len(recs), recs[0])
	}
	if _, answer := post(sid, call(`{"text":"still here"}`)); !strings.Contains(answer, "still here") {
		t.Fatalf("a valid call after them: %.200s", answer)
	}
}

// A modern client's notifications/cancelled is accepted and ends nothing:
// the modern era cancels by closing the request's stream, and modern
// requests of every client share one space of ids, so a client naming
// another's id must not end that call (here one the MCP library serves,
// its members being ambiguous).
func TestModernCancelEndsNoOnesCall(t *testing.T) {
	_, td := withFixture(t, mcpserver.EraModern)
	victim, other := newRawClient(t, td, true), newRawClient(t, td, true)
	done := make(chan []byte, 1)
	go func() {
		_, body := victim.call(42, "tools/call", "fx__slow_read", `{"name":"fx__slow_read","NAME":"fx__slow_read","arguments":{"ms":1500}}`, "")
		done <- body
	}()
	cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":42,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	for sent := 0; ; sent++ {
		select {
		case body := <-done:
			if !strings.Contains(string(body), "waited 1500 ms") {
				t.Fatalf("the call ended without its result after %d cancellations of another client: %s", sent, body)
			}
			return
		case <-time.After(20 * time.Millisecond):
			if resp, body := other.post("notifications/cancelled", cancel, ""); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("notifications/cancelled: %d %s", resp.StatusCode, body)
			}
		}
	}
}

// A client that stops reading its answer is disconnected after
// limits.write_stall_timeout, said in the log and counted, instead of
// holding its connection and proxyd's goroutine for as long as it likes;
// other clients are served meanwhile.
func TestEndpointCutsClientThatStopsReading(t *testing.T) {
	fx, err := mcpserver.Start(mcpserver.Options{Era: mcpserver.EraBoth})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fx.Close() })
	logs := &syncbuf.Buffer{}
	td := startDaemon(t, "listen: 127.0.0.1:0\nlimits:\n  write_stall_timeout: 300ms\nservers:\n  - name: fx\n    url: "+fx.URL()+"\n",
		func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	waitReady(t, td, "fx")
	url, token := endpoint(t, td)
	post, sid := legacySession(t, url, token)

	// Calls of 512 KiB each, sent one after another on one connection
	// whose answers (32 MiB, far more than the sockets hold) are never
	// read.
	c, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const calls, size = 64, 512 << 10
	go func() {
		text := strings.Repeat("x", size)
		for i := range calls {
			req := legacyRequest(url, token, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":"big-%d","method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"%s"}}}`, i, text))
			if req.Write(c) != nil {
				return // cut off
			}
		}
	}()

	waitfor.Cond(t, 20*time.Second, "the stalled client to be cut off", func() (bool, string) {
		m, err := td.client.Metrics(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(m, "mcpx_write_stalls_total 1"), grep(m, "mcpx_write_stalls")
	})
	if !strings.Contains(logs.String(), "stopped taking what proxyd writes") || !strings.Contains(logs.String(), "limits.write_stall_timeout=300ms") {
		t.Errorf("the log does not say why the client was cut off:\n%s", grep(logs.String(), "WARN"))
	}
	if n, _ := io.Copy(io.Discard, c); n >= calls*size {
		t.Fatalf("the stalled client still got all its answers (%d bytes)", n)
	}
	// The session and the endpoint serve the next call.
	r, body := post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"after"}}}`)
	if r.StatusCode != http.StatusOK || !strings.Contains(body, `"text":"after"`) {
		t.Fatalf("a call after the cut: %d %s", r.StatusCode, body)
	}
}
