package proxyd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/store"
)

// An open event stream must not hold shutdown for the whole drain budget:
// with a budget of an hour, this test hangs (and times out) unless
// streams end when shutdown starts.
func TestShutdownEndsStreams(t *testing.T) {
	fx, err := mcpserver.Start(mcpserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fx.Close()
	td := startDaemon(t, "listen: 127.0.0.1:0\nservers:\n  - name: fx\n    url: "+fx.URL()+"\n",
		func(o *Options) { o.ShutdownTimeout = time.Hour })
	waitReady(t, td, "fx")
	url, token := endpoint(t, td)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	get, _ := http.NewRequest(http.MethodGet, url, nil)
	get.Header.Set("Accept", "text/event-stream")
	get.Header.Set("Authorization", "Bearer "+token)
	get.Header.Set("Mcp-Session-Id", sid)
	get.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	stream, err := http.DefaultClient.Do(get)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %d", stream.StatusCode)
	}
	ended := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
		}
		close(ended)
	}()
	if err := td.stop(); err != nil {
		t.Fatal(err)
	}
	<-ended
}

// A call waiting for its client's retry (a modern client's call on a
// legacy upstream that asked for input) runs in the handler of the
// client's first request; shutdown must end it rather than drain it:
// with a drain budget and a call timeout of an hour, this test hangs
// unless it does.
func TestShutdownEndsCallsWaitingForRetries(t *testing.T) {
	up := startRelayUpstream(t)
	td := startDaemon(t, "listen: 127.0.0.1:0\nservers:\n  - name: legacy\n    url: "+up.url+"\n    protocol: legacy\n    timeout: 1h\n",
		func(o *Options) { o.ShutdownTimeout = time.Hour })
	waitReady(t, td, "legacy")
	url, token := endpoint(t, td)
	resp := postModernCall(t, url, token, "legacy__ask", "")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"input_required"`) {
		t.Fatalf("first round: %s", body)
	}
	if err := td.stop(); err != nil {
		t.Fatal(err)
	}
}

// holdAt blocks the log record with message msg until release is closed,
// holding Run at that point of its shutdown.
type holdAt struct {
	slog.Handler
	msg     string
	release chan struct{}
}

func (h holdAt) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		<-h.release
	}
	return h.Handler.Handle(ctx, r)
}

// 'mcpx down' returns once the socket stops answering, and 'mcpx up' may
// follow at once: by then the replica id must be free, although the old
// process is still exiting. Run is held at its last log line; without
// leaving the replicas table before the socket goes, the row is still
// there.
func TestReplicaLeftBeforeSocketGoes(t *testing.T) {
	release := make(chan struct{})
	td := startDaemon(t, "", func(o *Options) {
		o.Logger = slog.New(holdAt{Handler: slog.NewTextHandler(io.Discard, nil), msg: "proxyd stopped", release: release})
	})
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := td.client.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, 20*time.Second, "the socket to stop answering", func() (bool, string) {
		_, err := td.client.Status(ctx)
		return api.IsNotRunning(err), fmt.Sprint(err)
	})
	db, err := store.Open(filepath.Join(td.stateDir, DBFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM replicas`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d replica rows once the socket is gone, want 0", n)
	}
}

// The socket's MCP endpoint (the stdio bridge's) is served by the control
// server, which stays up through a shutdown. A call on it that was running
// when the shutdown began is drained and answered, not cut off when the
// upstreams close; a request after that point is refused before anything
// runs (503, code stopping), and status says proxyd is stopping. Run is
// held at its "stopping" log line to look in between.
func TestSocketCallsDrainedThenRefused(t *testing.T) {
	fx, err := mcpserver.Start(mcpserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fx.Close()
	release := make(chan struct{})
	var once sync.Once
	td := startDaemon(t, "listen: 127.0.0.1:0\nservers:\n  - name: fx\n    url: "+fx.URL()+"\n", func(o *Options) {
		o.Logger = slog.New(holdAt{Handler: slog.NewTextHandler(io.Discard, nil), msg: "proxyd stopping: draining in-flight calls", release: release})
	})
	defer once.Do(func() { close(release) })
	waitReady(t, td, "fx")
	hc := td.socketHTTP()
	call := func(tool, args string) (*http.Response, error) {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args +
			`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, _ := http.NewRequest(http.MethodPost, api.MCPEndpoint, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", tool)
		return hc.Do(req)
	}
	type answer struct {
		body string
		err  error
	}
	slow := make(chan answer, 1)
	go func() {
		resp, err := call("fx__"+mcpserver.ToolSlowRead, `{"ms":1000}`)
		if err != nil {
			slow <- answer{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		slow <- answer{string(b), err}
	}()
	waitfor.Cond(t, 20*time.Second, "the slow call to reach the upstream", func() (bool, string) {
		n := fx.RequestCount("tools/call")
		return n == 1, fmt.Sprint(n, " tools/call")
	})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := td.client.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, 20*time.Second, "status to say stopping", func() (bool, string) {
		st, err := td.client.Status(ctx)
		return err == nil && st.Stopping, fmt.Sprint(st, err)
	})
	resp, err := call("fx__"+mcpserver.ToolEcho, `{"text":"late"}`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var eb api.ErrorBody
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(b, &eb) != nil || eb.Error.Code != api.CodeStopping {
		t.Fatalf("a socket call during the shutdown: HTTP %d %s, want 503 with code %q", resp.StatusCode, b, api.CodeStopping)
	}
	if n := fx.RequestCount("tools/call"); n != 1 {
		t.Fatalf("the refused call reached the upstream (%d tools/call)", n)
	}

	once.Do(func() { close(release) })
	got := <-slow
	if got.err != nil || !strings.Contains(got.body, "waited 1000 ms") {
		t.Fatalf("the call running when the shutdown began: %q, %v; want its result", got.body, got.err)
	}
}
