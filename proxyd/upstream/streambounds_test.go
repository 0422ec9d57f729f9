package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// The counting itself: lines and events of every line ending, blank
// lines ending events, and the first byte over the bound failing.
func TestBoundedStreamCounts(t *testing.T) {
	line := func(n int) string { return "data: " + strings.Repeat("x", n-len("data: ")) }
	cases := []struct {
		name    string
		stream  string
		wantErr string
	}{
		{"events at the bound", line(64) + "\n\n" + line(63) + "\r\n\r\n", ""},
		{"line over the bound", line(66) + "\n\n", "line longer"},
		{"endless line", line(200), "line longer"},
		{"event of short lines over the bound", strings.Repeat(line(20)+"\n", 4) + "\n", "event longer"},
		{"short events in a long stream", strings.Repeat(line(20)+"\n"+line(20)+"\n\n", 1000), ""},
		{"CRLF blank lines end events", strings.Repeat(line(30)+"\r\n\r\n", 10), ""},
		{"comments count as lines", ": " + strings.Repeat("k", 70) + "\n", "line longer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &callerr.Recorder{}
			s := &boundedStream{rc: io.NopCloser(&smallReads{s: c.stream}), max: 65, rec: rec}
			_, err := io.ReadAll(s)
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				return
			}
			var le *callerr.LimitError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), c.wantErr) || le.Limit != "max_response_bytes" {
				t.Fatalf("read: %v, want a LimitError saying %q", err, c.wantErr)
			}
			if rec.Facts().Limit == nil {
				t.Fatal("the breach was not recorded for the call")
			}
		})
	}
}

// smallReads hands out a string 7 bytes at a time, so lines span reads.
type smallReads struct{ s string }

func (r *smallReads) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 7)], r.s)
	r.s = r.s[n:]
	return n, nil
}

// A call whose event-stream response breaks a bound fails at once,
// classified proxy_policy in the upstream's domain with the limit named;
// the server stays connected and the next call works.
func TestCallStreamOverBoundFails(t *testing.T) {
	fx := startFixture(t, mcpserver.EraLegacy)
	m := newManager(t, config.Server{Name: "fx", URL: fx.URL(), Protocol: config.ProtocolLegacy, MaxResponseBytes: 256 << 10})
	c, _ := m.Get("fx")
	waitState(t, c, api.StateReady)
	for _, shape := range []string{mcpserver.SSEEndlessLine, mcpserver.SSEHugeEvent} {
		t.Run(shape, func(t *testing.T) {
			if _, err := fx.AddFault(mcpserver.Fault{Kind: mcpserver.FaultSSE, SSE: shape, Tool: mcpserver.ToolEcho, Count: 1, Bytes: 1 << 20}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ctx, rec := callerr.WithRecorder(ctx)
			_, err := c.CallTool(ctx, mcpserver.ToolEcho, []byte(`{"text":"hi"}`))
			if err == nil {
				t.Fatal("the call succeeded")
			}
			if ctx.Err() != nil {
				t.Fatalf("the call ran into its timeout: %v", err)
			}
			if !strings.Contains(err.Error(), "max_response_bytes") {
				t.Fatalf("error %q does not name the limit", err)
			}
			cl := callerr.Classify(callerr.Input{Err: err, Facts: rec.Facts()})
			if cl.Class != callerr.ClassProxyPolicy || cl.Domain != callerr.DomainUpstream || !strings.Contains(cl.Reason, "max_response_bytes") {
				t.Fatalf("classified %+v (err %v), want proxy_policy/upstream naming max_response_bytes", cl, err)
			}
			if st := c.Status(); st.State != api.StateReady {
				t.Fatalf("state %s after a call's breach, want ready", st.State)
			}
			if _, err := c.CallTool(context.Background(), mcpserver.ToolEcho, []byte(`{"text":"hi"}`)); err != nil {
				t.Fatalf("the next call: %v", err)
			}
		})
	}
}

// A standing stream that breaks a bound drops the connection: the server
// shows an error naming the limit, and connects again after a backoff that
// grows while the upstream keeps misbehaving.
func TestStandingStreamOverBoundDropsConnection(t *testing.T) {
	cases := []struct {
		name  string
		fault mcpserver.Fault
		limit string
	}{
		{"endless line", mcpserver.Fault{Kind: mcpserver.FaultSSE, Method: mcpserver.MethodGET, SSE: mcpserver.SSEEndlessLine}, "max_response_bytes"},
		{"huge event", mcpserver.Fault{Kind: mcpserver.FaultSSE, Method: mcpserver.MethodGET, SSE: mcpserver.SSEHugeEvent, Bytes: 1 << 20}, "max_response_bytes"},
		{"drip", mcpserver.Fault{Kind: mcpserver.FaultSSE, Method: mcpserver.MethodGET, SSE: mcpserver.SSEDrip, DelayMS: 20}, "stream_idle_timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fx := startFixture(t, mcpserver.EraLegacy)
			if _, err := fx.AddFault(tc.fault); err != nil {
				t.Fatal(err)
			}
			m := newManager(t, config.Server{Name: "fx", URL: fx.URL(), Protocol: config.ProtocolLegacy,
				MaxResponseBytes: 256 << 10, StreamIdleTimeout: config.Duration(300 * time.Millisecond)})
			c, _ := m.Get("fx")
			st := waitState(t, c, api.StateError)
			if !strings.Contains(st.LastError, tc.limit) || !strings.Contains(st.LastError, "connecting again in 1s") {
				t.Fatalf("last error %q, want the limit %s and the backoff named", st.LastError, tc.limit)
			}
			waitfor.Cond(t, 20*time.Second, "a second breach with a longer backoff", func() (bool, string) {
				st := c.Status()
				return strings.Contains(st.LastError, "connecting again in 2s"), fmt.Sprintf("%s: %s", st.State, st.LastError)
			})
			fx.ClearFaults()
			waitState(t, c, api.StateReady)
		})
	}
}

// A silent standing stream is closed after stream_idle_timeout and opened
// again; the server stays ready.
func TestSilentStandingStreamReopened(t *testing.T) {
	fx := startFixture(t, mcpserver.EraLegacy)
	m := newManager(t, config.Server{Name: "fx", URL: fx.URL(), Protocol: config.ProtocolLegacy,
		StreamIdleTimeout: config.Duration(100 * time.Millisecond)})
	c, _ := m.Get("fx")
	waitState(t, c, api.StateReady)
	waitfor.Cond(t, 20*time.Second, "the standing stream to be opened three times", func() (bool, string) {
		n := fx.Stats().HTTPMethods["GET"]
		return n >= 3, fmt.Sprintf("%d GETs", n)
	})
	if st := c.Status(); st.State != api.StateReady {
		t.Fatalf("state %s (%s), want ready", st.State, st.LastError)
	}
}

// A reply carrying another request's id is not taken as the answer: the
// call fails as a JSON-RPC error of the upstream.
func TestReplyWithWrongIDRefused(t *testing.T) {
	for _, era := range []mcpserver.Era{mcpserver.EraLegacy, mcpserver.EraModern} {
		t.Run(string(era), func(t *testing.T) {
			fx := startFixture(t, era)
			m := newManager(t, config.Server{Name: "fx", URL: fx.URL()})
			c, _ := m.Get("fx")
			waitState(t, c, api.StateReady)
			if _, err := fx.AddFault(mcpserver.Fault{Kind: mcpserver.FaultWrongID, Tool: mcpserver.ToolEcho, Count: 1}); err != nil {
				t.Fatal(err)
			}
			ctx, rec := callerr.WithRecorder(context.Background())
			res, err := c.CallTool(ctx, mcpserver.ToolEcho, []byte(`{"text":"hi"}`))
			if err == nil {
				t.Fatalf("a reply with another id was taken as the result: %s", res.Raw)
			}
			cl := callerr.Classify(callerr.Input{Err: err, Facts: rec.Facts()})
			if cl.Class != callerr.ClassJSONRPC || cl.Domain != callerr.DomainUpstream || !strings.Contains(err.Error(), "id") {
				t.Fatalf("classified %+v (err %v), want jsonrpc/upstream naming the id", cl, err)
			}
			if _, err := c.CallTool(context.Background(), mcpserver.ToolEcho, []byte(`{"text":"hi"}`)); err != nil {
				t.Fatalf("the next call: %v", err)
			}
		})
	}
}

// A JSON-RPC error is recorded with its code whether it comes as a JSON
// answer (the transport peeks at it) or as an SSE answer's event (the
// relay's stream reader finds it), so a code the library knows nothing
// of still classifies as the upstream's JSON-RPC error.
func TestJSONRPCErrorRecordedInEitherAnswer(t *testing.T) {
	for _, era := range []mcpserver.Era{mcpserver.EraLegacy, mcpserver.EraModern} {
		for _, ct := range []string{"application/json", mcpserver.ContentTypeSSE} {
			t.Run(string(era)+"/"+ct, func(t *testing.T) {
				fx := startFixture(t, era)
				// The call recorder's transport outermost, as the daemon has it.
				m := NewManager(Options{Version: "test", Wrappers: []Wrapper{
					func(_ string, next http.RoundTripper) http.RoundTripper { return callerr.NewTransport(next) },
				}})
				m.Apply([]config.Server{{Name: "fx", URL: fx.URL()}})
				t.Cleanup(func() { m.Close(context.Background()) })
				c, _ := m.Get("fx")
				waitState(t, c, api.StateReady)
				if _, err := fx.AddFault(mcpserver.Fault{Kind: mcpserver.FaultJSONRPCError, Tool: mcpserver.ToolEcho, Code: -32099, Message: "custom", ContentType: ct, Count: 1}); err != nil {
					t.Fatal(err)
				}
				ctx, rec := callerr.WithRecorder(context.Background())
				if res, err := c.CallTool(ctx, mcpserver.ToolEcho, []byte(`{"text":"hi"}`)); err == nil {
					t.Fatalf("the error was taken as a result: %s", res.Raw)
				}
				f := rec.Facts()
				if f.ContentType != ct || !f.HasJSONRPCCode || f.JSONRPCCode != -32099 {
					t.Fatalf("recorded %s, code %d (%v); want %s, -32099", f.ContentType, f.JSONRPCCode, f.HasJSONRPCCode, ct)
				}
			})
		}
	}
}

// Which replies answer request "mcpx-7": its own id, and an error under a
// null id (the server could not read the id; JSON-RPC 2.0, 5).
func TestReplyFor(t *testing.T) {
	for _, tc := range []struct {
		id      string
		isError bool
		ok      bool
	}{
		{`"mcpx-7"`, false, true},
		{`"mcpx-7"`, true, true},
		{`"mcpx-8"`, false, false},
		{`"mcpx-8"`, true, false},
		{`7`, false, false},
		{`null`, true, true},
		{`null`, false, false},
		{``, false, false},
	} {
		err := replyFor(json.RawMessage(tc.id), "mcpx-7", tc.isError)
		if (err == nil) != tc.ok {
			t.Errorf("replyFor(%s, error=%v): %v, want ok=%v", tc.id, tc.isError, err, tc.ok)
		}
		if tc.id == "" {
			continue // the library's transport has no reply without an id member
		}
		msg := `{"jsonrpc":"2.0","id":` + tc.id + `,"result":{}}`
		if tc.isError {
			msg = `{"jsonrpc":"2.0","id":` + tc.id + `,"error":{"code":-32000,"message":"x"}}`
		}
		var resp transport.JSONRPCResponse
		if err := json.Unmarshal([]byte(msg), &resp); err != nil {
			t.Fatal(err)
		}
		if err := libraryReplyFor(&resp, "mcpx-7"); (err == nil) != tc.ok {
			t.Errorf("libraryReplyFor(%s, error=%v): %v, want ok=%v", tc.id, tc.isError, err, tc.ok)
		}
	}
}

// A server removed from the config, or connected again, leaves no HTTP
// connection behind: reload cycles do not pile up descriptors.
func TestRemovedServerClosesItsConnections(t *testing.T) {
	fx := mcpserver.New(mcpserver.Options{Era: mcpserver.EraLegacy})
	t.Cleanup(func() { fx.Close() })
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	srv := httptest.NewUnstartedServer(fx.Handler())
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateNew:
			open[c] = true
		case http.StateClosed, http.StateHijacked:
			delete(open, c)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	openConns := func() int { mu.Lock(); defer mu.Unlock(); return len(open) }

	m := NewManager(Options{Version: "test"})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m.Close(ctx)
	})
	cfg := config.Server{Name: "fx", URL: srv.URL + "/mcp", Protocol: config.ProtocolLegacy}
	for i := range 5 {
		cfg.Timeout = config.Duration(time.Duration(i+1) * time.Minute) // a change: connect anew
		m.Apply([]config.Server{cfg})
		c, _ := m.Get("fx")
		waitState(t, c, api.StateReady)
		if _, err := c.CallTool(context.Background(), mcpserver.ToolEcho, []byte(`{"text":"hi"}`)); err != nil {
			t.Fatal(err)
		}
	}
	// The current connection holds a few (its calls, its GET stream); five
	// generations' worth would show a leak.
	waitfor.Cond(t, 10*time.Second, "connections of replaced generations to close", func() (bool, string) {
		n := openConns()
		return n <= 3, fmt.Sprintf("%d open", n)
	})
	m.Apply(nil)
	waitfor.Cond(t, 10*time.Second, "every connection of the removed server to close", func() (bool, string) {
		n := openConns()
		return n == 0, fmt.Sprintf("%d open", n)
	})
}
