package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpx-dev/mcpx/internal/syncbuf"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/config"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// rawChildEnv makes the test binary a stdio MCP server that writes its
// messages byte for byte as rawChild spells them (see TestMain).
const rawChildEnv = "MCPX_TEST_RAW_STDIO_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(rawChildEnv) == "1" {
		rawChild()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// What rawChild writes during a call of "ask": members out of sorted
// order, a number past 2^53 and one past a float64, '<' and '&' unescaped.
const (
	rawProgress    = `{"progressToken":%s,"progress":9007199254740993,"total":1e400,"zeta":"<z>","alpha":1}`
	rawElicitation = `{"message":"a & b","requestedSchema":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer","default":12345678901234567890}}}}`
	rawLog         = `{"level":"info","data":{"zeta":1,"alpha":12345678901234567891}}`
)

// rawChild speaks the legacy era on stdin and stdout. Its tool "ask"
// sends a progress notification, a log message and an elicitation
// request, and returns two texts: the elicitation's answer and the call's
// request, as the bytes it read. "fail" answers with a JSON-RPC error;
// "huge" writes a line of 64 KiB; "flood" sends {"n":N} progress
// notifications before its result.
func rawChild() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	send := func(format string, a ...any) {
		fmt.Fprintf(out, format+"\n", a...)
		out.Flush()
	}
	answer := func(id json.RawMessage, result string) {
		send(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
	}
	text := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for in.Scan() {
		line := in.Text()
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string `json:"name"`
				Arguments json.RawMessage
				Meta      struct {
					ProgressToken json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		switch {
		case m.Method == "initialize":
			answer(m.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"logging":{}},"serverInfo":{"name":"raw","version":"1"}}`)
		case m.Method == "tools/list":
			answer(m.ID, `{"tools":[{"name":"ask","inputSchema":{"type":"object"}},{"name":"fail","inputSchema":{"type":"object"}},{"name":"huge","inputSchema":{"type":"object"}},{"name":"flood","inputSchema":{"type":"object"}}]}`)
		case m.Method == "tools/call" && m.Params.Name == "ask":
			if len(m.Params.Meta.ProgressToken) > 0 {
				send(`{"jsonrpc":"2.0","method":"notifications/progress","params":`+rawProgress+`}`, m.Params.Meta.ProgressToken)
			}
			send(`{"jsonrpc":"2.0","method":"notifications/message","params":%s}`, rawLog)
			send(`{"jsonrpc":"2.0","id":"ask-1","method":"elicitation/create","params":%s}`, rawElicitation)
			got := ""
			for got == "" && in.Scan() {
				if strings.Contains(in.Text(), `"ask-1"`) {
					got = in.Text()
				}
			}
			answer(m.ID, `{"content":[{"type":"text","text":`+text(got)+`},{"type":"text","text":`+text(line)+`}]}`)
		case m.Method == "tools/call" && m.Params.Name == "flood":
			var a struct{ N int }
			_ = json.Unmarshal(m.Params.Arguments, &a)
			for i := 1; i <= a.N; i++ {
				send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d}}`, m.Params.Meta.ProgressToken, i)
			}
			answer(m.ID, `{"content":[]}`)
		case m.Method == "tools/call" && m.Params.Name == "fail":
			send(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"no such thing"}}`, m.ID)
		case m.Method == "tools/call" && m.Params.Name == "huge":
			answer(m.ID, `{"content":[{"type":"text","text":"`+strings.Repeat("x", 64<<10)+`"}]}`)
		case len(m.ID) > 0 && m.Method != "":
			answer(m.ID, `{}`)
		}
	}
}

// rawChildServer configures rawChild as a stdio server.
func rawChildServer(t *testing.T) config.Server {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return config.Server{Name: "raw", Command: exe, Env: map[string]string{rawChildEnv: "1"}}
}

// recordedCall relays a call of tool to s (ready first) with the call's
// recorder in its context, as proxyd's funnel does.
func recordedCall(t *testing.T, s config.Server, tool string) (*Conn, *callerr.Recorder, error) {
	t.Helper()
	c, _ := newManager(t, s).Get(s.Name)
	waitState(t, c, api.StateReady)
	return recordedCallOn(t, c, tool)
}

// recordedCallOn is recordedCall on a connection made already.
func recordedCallOn(t *testing.T, c *Conn, tool string) (*Conn, *callerr.Recorder, error) {
	t.Helper()
	ctx, rec := callerr.WithRecorder(context.Background())
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err := c.Relay(ctx, callExchange(tool, `{}`, nil, false))
	return c, rec, err
}

// askAsItCame calls "ask" of a raw server (rawChild, rawSSEServer) and
// checks that its requests and notifications reached the client as the
// server wrote them, and the client's answer and the call's arguments
// the server as written: no member reordered, no number rounded, nothing
// escaped.
func askAsItCame(t *testing.T, c *Conn) {
	t.Helper()
	const reply = `{"action":"accept","content":{"zeta":"<b> & </b>","alpha":12345678901234567890}}`
	var asked json.RawMessage
	h := &recordingHandler{accepts: map[string]bool{string(mcp.MethodElicitationCreate): true},
		answer: func(_ string, params json.RawMessage) (json.RawMessage, error) {
			asked = append(asked[:0], params...)
			return json.RawMessage(reply), nil
		}}
	const args = `{"q":"<i>&amp;</i>","big":123456789012345678901234567890,"z":1,"a":2}`
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.Relay(ctx, callExchange("ask", args, h, true))
	if err != nil {
		t.Fatal(err)
	}
	if string(asked) != rawElicitation {
		t.Errorf("elicitation params reached the client as\n%s\nwant\n%s", asked, rawElicitation)
	}
	var texts struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(res, &texts); err != nil || len(texts.Content) != 2 {
		t.Fatalf("result %s (%v)", res, err)
	}
	if want := `,"result":` + reply + `}`; !strings.HasSuffix(texts.Content[0].Text, want) {
		t.Errorf("the server read the answer as\n%s\nwant it to end\n%s", texts.Content[0].Text, want)
	}
	if want := `"arguments":` + args; !strings.Contains(texts.Content[1].Text, want) {
		t.Errorf("the server read the call as\n%s\nwant it to hold\n%s", texts.Content[1].Text, want)
	}
	progress := h.notifications(string(mcp.MethodNotificationProgress))
	if len(progress) != 1 || !strings.HasSuffix(progress[0], `,"progress":9007199254740993,"total":1e400,"zeta":"<z>","alpha":1}`) {
		t.Errorf("progress reached the client as %q", progress)
	}
	logs := h.notifications(string(mcp.MethodNotificationMessage))
	if len(logs) != 1 || logs[0] != rawLog {
		t.Errorf("log messages reached the client as %q, want %s", logs, rawLog)
	}
}

// A stdio server's requests and notifications reach the client as the
// server wrote them, and the client's answer and the call's arguments
// reach the server as written: no member reordered, no number rounded,
// nothing escaped (the MCP library's transport decodes them into maps).
func TestStdioRelaysBytesAsTheyCame(t *testing.T) {
	m := newManager(t, rawChildServer(t))
	c, _ := m.Get("raw")
	waitState(t, c, api.StateReady)

	askAsItCame(t, c)
}

// A stdio server's JSON-RPC error is recorded with its code, as on HTTP,
// so the call is classified by it.
func TestStdioErrorCodeRecorded(t *testing.T) {
	_, rec, err := recordedCall(t, rawChildServer(t), "fail")
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Code != -32602 {
		t.Fatalf("err %v, want the server's -32602", err)
	}
	if f := rec.Facts(); !f.HasJSONRPCCode || f.JSONRPCCode != -32602 {
		t.Errorf("recorded %+v, want JSON-RPC code -32602", f)
	}
}

// A message past max_response_bytes fails the call waiting for it with
// the limit, and ends the connection, whose state says why; proxyd's
// memory does not follow the message. On stdio it is a stdout line and
// the server is ended; on the sse transport an event of the one stream
// that carries everything.
func TestMessagePastMaxResponseBytes(t *testing.T) {
	for _, tt := range []struct {
		name   string
		server func(t *testing.T) config.Server
		named  string // in the server's last error
	}{
		{"stdio", rawChildServer, "stdout line longer than max_response_bytes"},
		{"sse", func(t *testing.T) config.Server {
			return config.Server{Name: "rawsse", URL: rawSSEServer(t, new(atomic.Int64)), Transport: config.TransportSSE}
		}, "max_response_bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.server(t)
			s.MaxResponseBytes = 32 << 10
			c, rec, err := recordedCall(t, s, "huge")
			var le *callerr.LimitError
			if !errors.As(err, &le) || le.Limit != "max_response_bytes" {
				t.Fatalf("err %v, want the max_response_bytes limit", err)
			}
			if rec.Facts().Limit == nil {
				t.Error("the limit is not recorded for the call's classification")
			}
			if st := waitState(t, c, api.StateError); !strings.Contains(st.LastError, tt.named) {
				t.Errorf("last error %q does not name the bound", st.LastError)
			}
		})
	}
}

// A legacy server built on the MCP library sends its sampling and roots
// requests on the standing GET stream: they reach the client as the
// server wrote them too (the library's listener would decode them into
// maps).
func TestStandingStreamRelaysBytesAsTheyCame(t *testing.T) {
	const meta = `{"zeta":1,"alpha":12345678901234567890}`
	s := server.NewMCPServer("ordered", "1")
	s.AddTool(mcp.NewTool("ask"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		//lint:ignore SA1019 a legacy server's sampling request is what is relayed
		res, err := server.ServerFromContext(ctx).RequestSampling(ctx, mcp.CreateMessageRequest{CreateMessageParams: mcp.CreateMessageParams{
			Messages:  []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("hi")}},
			MaxTokens: 10,
			Metadata:  json.RawMessage(meta),
		}})
		if err != nil {
			return nil, err
		}
		return mcp.NewToolResultText(res.Model), nil
	})
	srv := httptest.NewServer(server.NewStreamableHTTPServer(s, server.WithStateful(true)))
	t.Cleanup(srv.Close)
	m := newManager(t, config.Server{Name: "ordered", URL: srv.URL, Protocol: config.ProtocolLegacy})
	c, _ := m.Get("ordered")
	waitState(t, c, api.StateReady)

	var asked json.RawMessage
	h := &recordingHandler{accepts: map[string]bool{string(mcp.MethodSamplingCreateMessage): true},
		answer: func(_ string, params json.RawMessage) (json.RawMessage, error) {
			asked = append(asked[:0], params...)
			return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"ok"},"model":"m-1"}`), nil
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.Relay(ctx, callExchange("ask", `{}`, h, false))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res), `"m-1"`) {
		t.Errorf("result %s, want the answer's model", res)
	}
	got := string(asked)
	if !strings.Contains(got, `"metadata":`+meta) || strings.Index(got, `"messages"`) > strings.Index(got, `"maxTokens"`) {
		t.Errorf("sampling params reached the client as\n%s\nwant the server's order and %s", got, meta)
	}
}

// stalledHandler is the client side of a call whose client does not read:
// its first notification waits until release is closed.
type stalledHandler struct {
	recordingHandler
	once    sync.Once
	stalled chan struct{} // closed when the first notification waits
	release chan struct{}
}

func newStalledHandler(t *testing.T) *stalledHandler {
	h := &stalledHandler{stalled: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() {
		select {
		case <-h.release:
		default:
			close(h.release)
		}
	})
	return h
}

func (h *stalledHandler) Notify(method string, params json.RawMessage) {
	h.once.Do(func() { close(h.stalled); <-h.release })
	h.recordingHandler.Notify(method, params)
}

// A client that does not read its stream holds up its own call only: the
// stdio server's other calls are answered meanwhile (one reader serves
// them all), and the stalled call's notifications wait for its client, in
// order, up to the bound proxyd holds for one call; past it they are
// dropped, not piled up.
func TestStdioStalledClientHoldsUpOnlyItsCall(t *testing.T) {
	logs := &syncbuf.Buffer{}
	s := rawChildServer(t)
	m := newManagerWith(t, Options{Version: "test", Logger: slog.New(slog.NewTextHandler(logs, nil))}, s)
	c, _ := m.Get(s.Name)
	waitState(t, c, api.StateReady)

	const flood = relay.OutboxMessages + 100
	h := newStalledHandler(t)
	h.accepts = map[string]bool{string(mcp.MethodElicitationCreate): true}
	stalled := make(chan error, 1)
	go func() {
		_, err := c.Relay(context.Background(), callExchange("flood", fmt.Sprintf(`{"n":%d}`, flood), h, true))
		stalled <- err
	}()
	<-h.stalled

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := c.Relay(ctx, callExchange("fail", `{}`, nil, false))
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Code != -32602 {
		t.Fatalf("another call while one client stalls: %v, want the server's -32602", err)
	}
	select {
	case err := <-stalled:
		t.Fatalf("the stalled call returned (%v) before its client took its notifications", err)
	default:
	}
	// With its result in, the stalled call waits only for its client:
	// it is no longer a call the server's requests could be meant for,
	// so another client's call is asked, not refused as one of two.
	waitfor.Cond(t, 10*time.Second, "the stalled call to have its result", func() (bool, string) {
		c.routes.mu.Lock()
		defer c.routes.mu.Unlock()
		return len(c.routes.inflight) == 0, fmt.Sprintf("%d calls in flight", len(c.routes.inflight))
	})
	other := &recordingHandler{accepts: map[string]bool{string(mcp.MethodElicitationCreate): true},
		answer: func(string, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"action":"decline"}`), nil
		}}
	if _, err := c.Relay(ctx, callExchange("ask", `{}`, other, false)); err != nil || len(other.asked) != 1 || len(h.asked) != 0 {
		t.Fatalf("a call asking for input while another client stalls: %v; asked %v, the stalled client %v", err, other.asked, h.asked)
	}

	close(h.release)
	if err := <-stalled; err != nil {
		t.Fatal(err)
	}
	got := h.notifications(string(mcp.MethodNotificationProgress))
	if len(got) < relay.OutboxMessages || len(got) >= flood {
		t.Fatalf("the stalled client got %d of %d progress notifications, want the bound's %d (and the one it stalled on)", len(got), flood, relay.OutboxMessages)
	}
	last := -1
	for _, p := range got {
		var n struct{ Progress int }
		if err := json.Unmarshal([]byte(p), &n); err != nil || n.Progress <= last {
			t.Fatalf("progress out of order: %s after %d", p, last)
		}
		last = n.Progress
	}
	if want := fmt.Sprintf("dropped=%d", flood-len(got)); !strings.Contains(logs.String(), want) {
		t.Errorf("the log does not say %s:\n%s", want, logs.String())
	}
	if n := c.NotificationsDropped(); n != int64(flood-len(got)) {
		t.Errorf("the server counts %d notifications dropped, want %d", n, flood-len(got))
	}
}

// rawSSEServer speaks the old HTTP+SSE transport (2024-11-05) and writes
// its messages byte for byte as rawChild does: its tool "ask" sends a
// progress notification, a log message and an elicitation request on the
// event stream and returns the elicitation's answer and the call's
// request as the bytes it read; "fail" answers with a JSON-RPC error;
// "drop" ends the event stream without an answer; "huge" answers with an
// event of 64 KiB.
func rawSSEServer(t *testing.T, streams *atomic.Int64) string {
	t.Helper()
	return rawSSEServerWith(t, streams, nil)
}

// rawSSEServerWith is rawSSEServer that, when early is not nil, speaks
// only the legacy era (the client initializes), asks for the client's
// roots as soon as it is initialized (before proxyd has listed its tools)
// and sends the client's answer to early.
func rawSSEServerWith(t *testing.T, streams *atomic.Int64, early chan<- string) string {
	t.Helper()
	events := make(chan string, 16)
	answers := make(chan string, 1)
	drop := make(chan struct{}, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /sse", func(w http.ResponseWriter, r *http.Request) {
		streams.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: endpoint\ndata: /messages?session=1\n\n")
		w.(http.Flusher).Flush()
		for {
			select {
			case e := <-events:
				fmt.Fprintf(w, "event: message\ndata: %s\n\n", e)
				w.(http.Flusher).Flush()
			case <-drop:
				return
			case <-r.Context().Done():
				return
			}
		}
	})
	mux.HandleFunc("POST /messages", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		line := string(b)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
				Meta struct {
					ProgressToken json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(b, &m) != nil {
			return
		}
		send := func(format string, a ...any) { events <- fmt.Sprintf(format, a...) }
		answer := func(result string) { send(`{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result) }
		text := func(s string) string { b, _ := json.Marshal(s); return string(b) }
		switch {
		case m.Method == "" && strings.Contains(line, `"ask-1"`):
			answers <- line
		case m.Method == "" && strings.Contains(line, `"early-roots"`):
			early <- line
		case m.Method == "server/discover" && early != nil:
			// A server of the legacy era only: the client initializes.
			send(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, m.ID)
		case m.Method == "notifications/initialized" && early != nil:
			send(`{"jsonrpc":"2.0","id":"early-roots","method":"roots/list"}`)
		case m.Method == "initialize":
			answer(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"logging":{}},"serverInfo":{"name":"raw-sse","version":"1"}}`)
		case m.Method == "tools/list":
			answer(`{"tools":[{"name":"ask","inputSchema":{"type":"object"}},{"name":"fail","inputSchema":{"type":"object"}},{"name":"drop","inputSchema":{"type":"object"}},{"name":"huge","inputSchema":{"type":"object"}}]}`)
		case m.Method == "tools/call" && m.Params.Name == "ask":
			if len(m.Params.Meta.ProgressToken) > 0 {
				send(`{"jsonrpc":"2.0","method":"notifications/progress","params":`+rawProgress+`}`, m.Params.Meta.ProgressToken)
			}
			send(`{"jsonrpc":"2.0","method":"notifications/message","params":%s}`, rawLog)
			send(`{"jsonrpc":"2.0","id":"ask-1","method":"elicitation/create","params":%s}`, rawElicitation)
			go func() {
				got := <-answers
				answer(`{"content":[{"type":"text","text":` + text(got) + `},{"type":"text","text":` + text(line) + `}]}`)
			}()
		case m.Method == "tools/call" && m.Params.Name == "fail":
			send(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"no such thing"}}`, m.ID)
		case m.Method == "tools/call" && m.Params.Name == "drop":
			drop <- struct{}{}
		case m.Method == "tools/call" && m.Params.Name == "huge":
			answer(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 64<<10) + `"}]}`)
		case len(m.ID) > 0 && m.Method != "":
			answer(`{}`)
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/sse"
}

// A server on the old HTTP+SSE transport that asks for roots once it is
// initialized, before proxyd is ready, is answered as outside any call
// (the MCP library took the request for a response and dropped it: the
// server waited in vain), and the connection becomes ready.
func TestSSEAnswersRequestsBeforeReady(t *testing.T) {
	early := make(chan string, 1)
	s := config.Server{Name: "rawsse", URL: rawSSEServerWith(t, new(atomic.Int64), early), Transport: config.TransportSSE}
	m := newManager(t, s)
	c, _ := m.Get(s.Name)
	select {
	case got := <-early:
		if want := `{"jsonrpc":"2.0","id":"early-roots","result":{"roots":[]}}`; got != want {
			t.Fatalf("the server's early request was answered %s, want %s", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server's request before the connection was ready was never answered")
	}
	waitState(t, c, api.StateReady)
	if _, _, err := recordedCallOn(t, c, "fail"); err == nil {
		t.Fatal("a call after the early request: no error, want the server's -32602")
	}
}

// On the old HTTP+SSE transport too, what the server sends reaches the
// client as the server wrote it, and the client's answer and the call's
// arguments reach the server as written (the MCP library decoded
// notifications into maps, took the server's requests for responses and
// dropped them, and re-encoded what proxyd sent); a JSON-RPC error's code
// is recorded for the classification.
func TestSSERelaysBytesAsTheyCame(t *testing.T) {
	var streams atomic.Int64
	s := config.Server{Name: "rawsse", URL: rawSSEServer(t, &streams), Transport: config.TransportSSE}
	m := newManager(t, s)
	c, _ := m.Get(s.Name)
	waitState(t, c, api.StateReady)

	askAsItCame(t, c)

	_, rec, err := recordedCallOn(t, c, "fail")
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Code != -32602 {
		t.Fatalf("err %v, want the server's -32602", err)
	}
	if f := rec.Facts(); !f.HasJSONRPCCode || f.JSONRPCCode != -32602 {
		t.Errorf("recorded %+v, want JSON-RPC code -32602", f)
	}

	// The stream's end ends the calls waiting on it at once, as a
	// network failure (the library let them wait out their timeout).
	_, rec, err = recordedCallOn(t, c, "drop")
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call whose stream ended: %v, want the stream's end", err)
	}
	cl := callerr.Classify(callerr.Input{Err: err, Facts: rec.Facts(), Transport: callerr.TransportSSE})
	if cl.Class != callerr.ClassNetwork || cl.Domain != callerr.DomainUpstream {
		t.Errorf("classified %+v (%v), want network/upstream", cl, err)
	}
	// And the connection is lost: proxyd says so, opens a new stream and
	// serves calls again.
	waitState(t, c, api.StateError)
	waitfor.Cond(t, 10*time.Second, "a second event stream", func() (bool, string) {
		return streams.Load() == 2, ""
	})
	waitState(t, c, api.StateReady)
	if _, _, err := recordedCallOn(t, c, "fail"); !errors.As(err, &rpc) || rpc.Code != -32602 {
		t.Fatalf("a call after the new stream: %v, want the server's -32602", err)
	}
}
