package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// legacyConn connects to fx pinned to the legacy (session) era.
func legacyConn(t testing.TB, fx *mcpserver.Server, onChange func(string)) *Conn {
	t.Helper()
	return legacyConnURL(t, fx.URL(), onChange)
}

// legacyConnURL connects to the MCP endpoint at url, legacy era pinned.
func legacyConnURL(t testing.TB, url string, onChange func(string)) *Conn {
	t.Helper()
	m := NewManager(Options{Version: "test", OnChange: onChange})
	m.Apply([]config.Server{{Name: "fx", URL: url, Protocol: config.ProtocolLegacy}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m.Close(ctx)
	})
	c, _ := m.Get("fx")
	waitReady(t, c)
	if c.SessionID() == "" {
		t.Fatal("no session id after connecting in the legacy era")
	}
	return c
}

func waitReady(t testing.TB, c *Conn) {
	t.Helper()
	waitState(t, c, api.StateReady)
}

func startLegacyFixture(t testing.TB, lossStatus int) *mcpserver.Server {
	t.Helper()
	fx, err := mcpserver.Start(mcpserver.Options{Era: mcpserver.EraLegacy, SessionLossStatus: lossStatus})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fx.Close() })
	return fx
}

func echo(ctx context.Context, c *Conn, text string) error {
	res, err := c.CallTool(ctx, "echo", json.RawMessage(fmt.Sprintf(`{"text":%q}`, text)))
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("echo returned isError: %s", res.Raw)
	}
	return nil
}

var lossStatuses = []struct {
	name   string
	status int
}{
	{"404 as the spec says", http.StatusNotFound},
	{"400 deviation", http.StatusBadRequest},
}

func TestReadAfterForgottenSession(t *testing.T) {
	for _, tt := range lossStatuses {
		t.Run(tt.name, func(t *testing.T) {
			fx := startLegacyFixture(t, tt.status)
			c := legacyConn(t, fx, nil)
			old := c.SessionID()
			inits := fx.InitializeCount()
			if fx.ForgetAllSessions() != 1 {
				t.Fatal("the fixture held no session")
			}
			ctx, info := WithCallInfo(context.Background())
			if err := echo(ctx, c, "after"); err != nil {
				t.Fatalf("call after a forgotten session: %v", err)
			}
			if !info.Reinit {
				t.Error("the call is not marked as having gone through a re-init")
			}
			if tt.status == http.StatusBadRequest && (!info.Deviation || !info.Retried) {
				t.Errorf("400 deviation: info %+v, want deviation and retried", *info)
			}
			st := c.Status()
			if st.Reinits != 1 || st.State != api.StateReady {
				t.Fatalf("reinits %d state %s, want 1 and ready", st.Reinits, st.State)
			}
			if got := fx.InitializeCount() - inits; got != 1 {
				t.Fatalf("%d initialize requests reached the server, want 1", got)
			}
			if c.SessionID() == old || c.SessionID() == "" {
				t.Fatalf("session id %q after re-init (was %q)", c.SessionID(), old)
			}
			if got := fx.Executions("echo"); got != 1 {
				t.Fatalf("echo executed %d times, want 1", got)
			}
		})
	}
}

func TestConcurrentReadsShareOneReinit(t *testing.T) {
	for _, tt := range lossStatuses {
		t.Run(tt.name, func(t *testing.T) {
			fx := startLegacyFixture(t, tt.status)
			c := legacyConn(t, fx, nil)
			inits := fx.InitializeCount()
			fx.ForgetAllSessions()
			const n = 20
			errs := make(chan error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- echo(context.Background(), c, strconv.Itoa(i))
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Errorf("call: %v", err)
				}
			}
			if got := fx.InitializeCount() - inits; got != 1 {
				t.Fatalf("%d initialize requests reached the server, want 1", got)
			}
			if st := c.Status(); st.Reinits != 1 || st.State != api.StateReady {
				t.Fatalf("reinits %d state %s, want 1 and ready", st.Reinits, st.State)
			}
			if got := fx.Stats().MissingSessionReplies; got != 0 {
				t.Fatalf("%d requests went out without a session id", got)
			}
		})
	}
}

// A call still running on the stale session does not hold up the
// re-initialisation, nor the calls that wait for it.
func TestReinitDoesNotWaitForSlowCalls(t *testing.T) {
	for _, tt := range lossStatuses {
		t.Run(tt.name, func(t *testing.T) {
			fx := startLegacyFixture(t, tt.status)
			c := legacyConn(t, fx, nil)
			slowCtx, stopSlow := context.WithCancel(context.Background())
			defer stopSlow()
			slowDone := make(chan struct{})
			go func() {
				defer close(slowDone)
				_, _ = c.CallTool(slowCtx, "slow_read", json.RawMessage(`{"ms":60000}`))
			}()
			waitfor.True(t, 10*time.Second, "slow_read to reach the fixture", func() bool { return fx.Executions("slow_read") > 0 })
			fx.ForgetAllSessions()
			if err := echo(context.Background(), c, "while slow_read runs"); err != nil {
				t.Fatal(err)
			}
			select {
			case <-slowDone:
				t.Fatal("the call after the lost session finished only once slow_read had ended")
			default:
			}
			if st := c.Status(); st.Reinits != 1 || st.State != api.StateReady {
				t.Fatalf("reinits %d state %s, want 1 and ready", st.Reinits, st.State)
			}
		})
	}
}

func TestWriteIsNotRepeated(t *testing.T) {
	for _, tt := range lossStatuses {
		t.Run(tt.name, func(t *testing.T) {
			fx := startLegacyFixture(t, tt.status)
			c := legacyConn(t, fx, nil)
			// The fixture forgets the session and answers the write as a
			// lost session: the request reached the server.
			if _, err := fx.AddFault(mcpserver.Fault{Kind: mcpserver.FaultHTTPStatus, Status: tt.status, Session: true, Tool: "write_note", Count: 1}); err != nil {
				t.Fatal(err)
			}
			ctx, info := WithCallInfo(context.Background())
			_, err := c.CallTool(ctx, "write_note", json.RawMessage(`{"text":"once"}`))
			if !errors.Is(err, ErrSessionReestablished) {
				t.Fatalf("write after a lost session: %v, want ErrSessionReestablished", err)
			}
			var sr *SessionReestablishedError
			if !errors.As(err, &sr) || sr.Tool != "write_note" || sr.Server != "fx" {
				t.Fatalf("error %#v", err)
			}
			if !info.Reinit || info.Retried || !info.NotRepeated {
				t.Fatalf("info %+v", *info)
			}
			if got := fx.Executions("write_note"); got != 0 {
				t.Fatalf("write_note executed %d times, want 0", got)
			}
			if st := c.Status(); st.State != api.StateReady || st.Reinits != 1 {
				t.Fatalf("state %s reinits %d, want ready and 1", st.State, st.Reinits)
			}
			if _, err := c.CallTool(context.Background(), "write_note", json.RawMessage(`{"text":"next"}`)); err != nil {
				t.Fatalf("the next call: %v", err)
			}
			if got := fx.Executions("write_note"); got != 1 {
				t.Fatalf("write_note executed %d times, want exactly 1", got)
			}
		})
	}
}

func TestChangedToolIsNotRetried(t *testing.T) {
	fx := startLegacyFixture(t, http.StatusNotFound)
	changes := make(chan string, 8)
	c := legacyConn(t, fx, func(s string) {
		select {
		case changes <- s:
		default:
		}
	})
	for len(changes) > 0 {
		<-changes
	}
	// Forget first, so no list_changed reaches proxyd before the call.
	fx.ForgetAllSessions()
	if err := fx.SetToolDescription("echo", "echo, changed while the session was lost"); err != nil {
		t.Fatal(err)
	}
	err := echo(context.Background(), c, "x")
	if !errors.Is(err, ErrSessionReestablished) {
		t.Fatalf("call of a changed tool: %v, want ErrSessionReestablished", err)
	}
	if got := fx.Executions("echo"); got != 0 {
		t.Fatalf("echo executed %d times, want 0", got)
	}
	if tl, _ := c.Tool("echo"); tl.Description != "echo, changed while the session was lost" {
		t.Fatalf("tool baseline not refreshed: %q", tl.Description)
	}
	select {
	case <-changes:
	case <-time.After(10 * time.Second):
		t.Fatal("the changed tool list was not announced")
	}
	if err := echo(context.Background(), c, "y"); err != nil {
		t.Fatalf("the next call: %v", err)
	}
}

func TestRetryLostAgainFailsCleanly(t *testing.T) {
	fx := startLegacyFixture(t, http.StatusNotFound)
	c := legacyConn(t, fx, nil)
	if _, err := fx.AddFault(mcpserver.Fault{Kind: mcpserver.FaultHTTPStatus, Status: 404, Session: true, Tool: "echo", Count: 2}); err != nil {
		t.Fatal(err)
	}
	ctx, info := WithCallInfo(context.Background())
	err := echo(ctx, c, "x")
	if err == nil || errors.Is(err, ErrSessionReestablished) || !errors.Is(err, transport.ErrSessionTerminated) {
		t.Fatalf("retry that 404s again: %v, want an ordinary session-terminated failure", err)
	}
	if !info.Reinit || !info.Retried {
		t.Fatalf("info %+v", *info)
	}
	if st := c.Status(); st.Reinits != 1 {
		t.Fatalf("reinits %d, want 1 (no loop)", st.Reinits)
	}
	if err := echo(context.Background(), c, "y"); err != nil {
		t.Fatalf("the next call: %v", err)
	}
	if got := fx.Executions("echo"); got != 1 {
		t.Fatalf("echo executed %d times, want 1", got)
	}
}

func TestPingThenCallSendsNoSessionlessRequest(t *testing.T) {
	fx := startLegacyFixture(t, http.StatusNotFound)
	c := legacyConn(t, fx, nil)
	inits := fx.InitializeCount()
	fx.ForgetAllSessions()
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("ping after a forgotten session: %v", err)
	}
	if err := echo(context.Background(), c, "x"); err != nil {
		t.Fatalf("call after the ping: %v", err)
	}
	if got := fx.Stats().MissingSessionReplies; got != 0 {
		t.Fatalf("%d requests went out without a session id", got)
	}
	if got := fx.InitializeCount() - inits; got != 1 {
		t.Fatalf("%d initialize requests, want 1", got)
	}
}

func TestModern404IsNotALostSession(t *testing.T) {
	fx := startFixture(t, mcpserver.EraBoth)
	m := newManager(t, config.Server{Name: "fx", URL: fx.URL()})
	c, _ := m.Get("fx")
	if st := waitState(t, c, api.StateReady); st.Era != EraModern {
		t.Fatalf("era %s, want modern", st.Era)
	}
	if ok, _ := c.Sessionful(); ok {
		t.Fatal("a modern-era connection reported a session")
	}
	if _, err := fx.AddFault(mcpserver.Fault{Kind: mcpserver.FaultHTTPStatus, Status: 404, Tool: "echo", Count: 1}); err != nil {
		t.Fatal(err)
	}
	ctx, info := WithCallInfo(context.Background())
	err := echo(ctx, c, "x")
	if err == nil || errors.Is(err, ErrSessionReestablished) {
		t.Fatalf("modern 404: %v, want an ordinary failure", err)
	}
	if info.Reinit || c.Status().Reinits != 0 {
		t.Fatalf("a modern-era 404 was taken for a lost session (info %+v)", *info)
	}
	if err := echo(context.Background(), c, "y"); err != nil {
		t.Fatalf("the next call: %v", err)
	}
}

func TestDeviationNeedsAllThree(t *testing.T) {
	tests := []struct {
		name string
		body string
		want bool
	}{
		{"the TypeScript SDK's answer", `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`, true},
		{"another 400", `{"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid params"},"id":1}`, false},
		{"plain text", `Bad Request: No valid session ID provided`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := startLegacyFixture(t, http.StatusNotFound)
			c := legacyConn(t, fx, nil)
			if _, err := fx.AddFault(mcpserver.Fault{Kind: mcpserver.FaultHTTPStatus, Status: 400, Tool: "echo", Count: 1,
				Body: tt.body, ContentType: "application/json"}); err != nil {
				t.Fatal(err)
			}
			ctx, info := WithCallInfo(context.Background())
			_ = echo(ctx, c, "x")
			if info.Deviation != tt.want || info.Reinit != tt.want {
				t.Fatalf("info %+v, want deviation=%v", *info, tt.want)
			}
		})
	}
}

func TestEndSession(t *testing.T) {
	tests := []struct {
		name        string
		allowDelete bool
		want        string
	}{
		{"DELETE accepted", true, EndedByDelete},
		{"DELETE refused", false, EndedByUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := startLegacyFixture(t, http.StatusNotFound)
			fx.SetDeleteAllowed(tt.allowDelete)
			c := legacyConn(t, fx, nil)
			how, err := c.EndSession(context.Background())
			if err != nil || how != tt.want {
				t.Fatalf("EndSession = %q, %v; want %q", how, err, tt.want)
			}
			if err := echo(context.Background(), c, "x"); err != nil {
				t.Fatalf("call after the session ended: %v", err)
			}
			if st := c.Status(); st.Reinits != 1 {
				t.Fatalf("reinits %d, want 1", st.Reinits)
			}
		})
	}
}

// serverEverything starts @modelcontextprotocol/server-everything on a free
// loopback port, or skips when it is not installed.
func serverEverything(t testing.TB) string {
	t.Helper()
	return serverEverythingOver(t, "streamableHttp", "/mcp")
}

// serverEverythingOver starts server-everything with transport (its
// argument), returning the URL of path on it.
func serverEverythingOver(t testing.TB, transport, path string) string {
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(node, script, transport)
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	waitfor.Cond(t, 20*time.Second, "server-everything to listen on "+addr, func() (bool, string) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, err.Error()
		}
		conn.Close()
		return true, ""
	})
	return "http://" + addr + path
}

// wireCounter counts, at the HTTP layer, initialize requests and the
// requests that went out without a session id (other than those that start
// a connection).
type wireCounter struct {
	next http.RoundTripper

	mu          sync.Mutex
	initialize  int
	sessionless []string
}

func (w *wireCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(strings.NewReader(string(body)))
		var msg struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &msg)
		w.mu.Lock()
		switch {
		case msg.Method == "initialize":
			w.initialize++
		case msg.Method == "server/discover":
			// The modern-era probe at connect: it starts a connection.
		case req.Header.Get(sessionHeader) == "":
			w.sessionless = append(w.sessionless, msg.Method)
		}
		w.mu.Unlock()
	}
	return w.next.RoundTrip(req)
}

func (w *wireCounter) counts() (int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.initialize, slices.Clone(w.sessionless)
}

func TestServerEverythingForgottenSession(t *testing.T) {
	url := serverEverything(t)
	wire := &wireCounter{}
	m := NewManager(Options{Version: "test", Wrappers: []Wrapper{func(_ string, next http.RoundTripper) http.RoundTripper {
		wire.next = next
		return wire
	}}})
	m.Apply([]config.Server{{Name: "everything", URL: url}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m.Close(ctx)
	})
	c, _ := m.Get("everything")
	if st := waitState(t, c, api.StateReady); st.Era != EraLegacy {
		t.Fatalf("era %s, want legacy", st.Era)
	}
	call := func(ctx context.Context) error {
		res, err := c.CallTool(ctx, "echo", json.RawMessage(`{"message":"hi"}`))
		if err == nil && res.IsError {
			err = fmt.Errorf("echo returned isError: %s", res.Raw)
		}
		return err
	}
	if err := call(context.Background()); err != nil {
		t.Fatal(err)
	}

	t.Run("one read after a deleted session", func(t *testing.T) {
		inits, _ := wire.counts()
		before := c.Status().Reinits
		if how, err := c.EndSession(context.Background()); err != nil || how != EndedByDelete {
			t.Fatalf("EndSession = %q, %v; want DELETE", how, err)
		}
		ctx, info := WithCallInfo(context.Background())
		if err := call(ctx); err != nil {
			t.Fatal(err)
		}
		if !info.Reinit || !info.Retried || !info.Deviation {
			t.Fatalf("info %+v: want reinit, retried and the 400 deviation", *info)
		}
		if n, _ := wire.counts(); n-inits != 1 || c.Status().Reinits-before != 1 || c.Status().State != api.StateReady {
			t.Fatalf("%d initialize requests, %d re-inits, state %s", n-inits, c.Status().Reinits-before, c.Status().State)
		}
	})

	t.Run("20 concurrent reads", func(t *testing.T) {
		inits, _ := wire.counts()
		before := c.Status().Reinits
		if _, err := c.EndSession(context.Background()); err != nil {
			t.Fatal(err)
		}
		const n = 20
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = call(context.Background())
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		}
		if got, _ := wire.counts(); got-inits != 1 {
			t.Fatalf("%d initialize requests reached server-everything, want 1", got-inits)
		}
		if got := c.Status().Reinits - before; got != 1 {
			t.Fatalf("%d re-inits, want 1", got)
		}
	})

	t.Run("ping first, then a call", func(t *testing.T) {
		if _, err := c.EndSession(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := c.Ping(context.Background()); err != nil {
			t.Fatalf("ping: %v", err)
		}
		if err := call(context.Background()); err != nil {
			t.Fatalf("call after the ping: %v", err)
		}
	})

	if _, sessionless := wire.counts(); len(sessionless) > 0 {
		t.Fatalf("requests sent without a session id: %v", sessionless)
	}
}

// BenchmarkForgottenSession100 fires 100 concurrent calls at a forgotten
// session, and as a baseline 100 concurrent calls at a live session just
// before. A burst's time is its slowest call's. One burst varies a lot on
// a small machine, so the added latency is taken between the two
// distributions: the median forgotten burst against the median live one
// (added_p50_ms), and the same at the 90th percentile (added_p90_ms), next
// to one initialize round trip (init_ms).
func BenchmarkForgottenSession100(b *testing.B) {
	fx := startLegacyFixture(b, http.StatusNotFound)
	c := legacyConn(b, fx, nil)
	ctx := context.Background()
	const n = 100
	burst := func() time.Duration {
		durs := make([]time.Duration, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				if err := echo(ctx, c, "x"); err != nil {
					b.Error(err)
				}
				durs[i] = time.Since(t0)
			}()
		}
		wg.Wait()
		return slices.Max(durs)
	}
	var live, forgotten, inits []time.Duration
	for b.Loop() {
		b.StopTimer()
		live = append(live, burst())
		inits = append(inits, measureInitialize(b, fx.URL()))
		before := c.Status().Reinits
		fx.ForgetAllSessions()
		b.StartTimer()
		forgotten = append(forgotten, burst())
		b.StopTimer()
		if got := c.Status().Reinits - before; got != 1 {
			b.Fatalf("%d re-inits for one forgotten session, want 1", got)
		}
		b.StartTimer()
	}
	for _, d := range [][]time.Duration{live, forgotten, inits} {
		slices.Sort(d)
	}
	at := func(d []time.Duration, q float64) time.Duration { return d[int(q*float64(len(d)-1))] }
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(at(live, 0.5)), "live_p50_ms")
	b.ReportMetric(ms(at(forgotten, 0.5)-at(live, 0.5)), "added_p50_ms")
	b.ReportMetric(ms(at(forgotten, 0.9)-at(live, 0.9)), "added_p90_ms")
	b.ReportMetric(ms(at(inits, 0.5)), "init_ms")
}

// measureInitialize times one legacy initialize request (a fresh HTTP
// connection, as a re-init after a restart would need).
func measureInitialize(b *testing.B, url string) time.Duration {
	b.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}`
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return time.Since(start)
}

func TestSessionReestablishedClassification(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		facts      callerr.Facts
		wantClass  string
		wantDomain string
		wantStatus int
	}{
		{"not repeated after a 404", &SessionReestablishedError{Server: "fx", Reason: "not read-only"},
			callerr.Facts{Dispatched: true, HTTPStatus: 404, SessionLost: true}, callerr.ClassSessionTerminated, callerr.DomainUpstream, 404},
		{"not repeated after the 400 deviation", fmt.Errorf("wrapped: %w", &SessionReestablishedError{Server: "fx"}),
			callerr.Facts{Dispatched: true, HTTPStatus: 400, HasJSONRPCCode: true, JSONRPCCode: -32000}, callerr.ClassSessionTerminated, callerr.DomainUpstream, 400},
		{"not sent at all", &SessionReestablishedError{Server: "fx"},
			callerr.Facts{}, callerr.ClassSessionTerminated, callerr.DomainUpstream, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := callerr.Classify(callerr.Input{Err: tt.err, Facts: tt.facts, Transport: callerr.TransportStreamableHTTP})
			if got.Class != tt.wantClass || got.Domain != tt.wantDomain || got.HTTPStatus != tt.wantStatus {
				t.Fatalf("Classify = %+v", got)
			}
		})
	}
}

func TestNonCallRequestsRetriedOnce(t *testing.T) {
	tests := []struct {
		name   string
		method string
		op     func(context.Context, *Conn) error
	}{
		{"ping", "ping", func(ctx context.Context, c *Conn) error { return c.Ping(ctx) }},
		{"tools/list", "tools/list", func(ctx context.Context, c *Conn) error {
			tools, err := c.ListTools(ctx)
			if err == nil && len(tools) == 0 {
				err = errors.New("no tools listed")
			}
			return err
		}},
	}
	for _, tt := range tests {
		for _, loss := range lossStatuses {
			t.Run(tt.name+"/"+loss.name, func(t *testing.T) {
				fx := startLegacyFixture(t, loss.status)
				c := legacyConn(t, fx, nil)
				if _, err := fx.AddFault(mcpserver.Fault{Kind: mcpserver.FaultHTTPStatus, Status: loss.status, Session: true, Method: tt.method, Count: 1}); err != nil {
					t.Fatal(err)
				}
				ctx, info := WithCallInfo(context.Background())
				if err := tt.op(ctx, c); err != nil {
					t.Fatalf("%s after a lost session: %v", tt.name, err)
				}
				if !info.Reinit || !info.Retried {
					t.Fatalf("info %+v, want reinit and retried", *info)
				}
				if st := c.Status(); st.Reinits != 1 || st.State != api.StateReady {
					t.Fatalf("reinits %d state %s", st.Reinits, st.State)
				}
			})
		}
	}
}

// No call reaches a re-established session before its initialized
// notification, even one that set out just before the re-initialisation
// began (a large request takes a while between the barrier check and the
// wire). A proxy in front of the fixture holds that notification for a
// while and watches for calls on the session it announces.
func TestNoCallBeforeInitializedNotification(t *testing.T) {
	for _, tt := range lossStatuses {
		t.Run(tt.name, func(t *testing.T) {
			fx := startLegacyFixture(t, tt.status)
			target, _ := neturl.Parse(fx.URL())
			target.Path = ""
			rp := httputil.NewSingleHostReverseProxy(target)
			var mu sync.Mutex
			var held string // the session whose initialized notification is held
			var hold atomic.Bool
			var early []string
			front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				var msg struct{ Method string }
				_ = json.Unmarshal(body, &msg)
				sid := r.Header.Get("Mcp-Session-Id")
				switch {
				case msg.Method == "notifications/initialized" && hold.Load():
					mu.Lock()
					held = sid
					mu.Unlock()
					<-time.After(300 * time.Millisecond) // a slow server, not a readiness wait
					mu.Lock()
					held = ""
					mu.Unlock()
				case msg.Method == "tools/call":
					mu.Lock()
					if held != "" && sid == held {
						early = append(early, sid)
					}
					mu.Unlock()
				}
				rp.ServeHTTP(w, r)
			}))
			// Closed after the connection (cleanups run last-in first-out):
			// its event stream goes through the proxy too.
			t.Cleanup(front.Close)
			c := legacyConnURL(t, front.URL+"/mcp", nil)
			hold.Store(true)
			fx.ForgetAllSessions()
			big := strings.Repeat("x", 512<<10)
			var wg sync.WaitGroup
			for i := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					text := "small"
					if i%2 == 0 {
						text = big
					}
					for range 3 {
						_ = echo(context.Background(), c, text)
					}
				}()
			}
			wg.Wait()
			if c.Status().Reinits == 0 {
				t.Fatal("no re-initialisation happened")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(early) > 0 {
				t.Fatalf("%d calls reached session %s before its initialized notification", len(early), early[0])
			}
		})
	}
}
