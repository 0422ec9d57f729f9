package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// startProxydNofile starts `mcpx proxyd` with its descriptor limit (soft
// and hard) set to nofile, and waits until it answers.
func (e *env) startProxydNofile(nofile int) *proxydProc {
	e.t.Helper()
	args := append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nofile), mcpxBin}, e.globals()...)
	p := e.spawn(exec.Command("/bin/sh", append(args, "proxyd", "--log-level", "debug")...))
	e.waitAnswering(p)
	return p
}

// openFDs counts the descriptors process pid holds.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("reading proxyd's descriptors: %v", err)
	}
	return len(ents)
}

// statusWithin asks proxyd for its status over the socket, failing the
// test when no answer comes within d.
func (e *env) statusWithin(d time.Duration) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if _, err := api.NewClient(e.Socket, "e2e").Status(ctx); err != nil {
		e.t.Fatalf("status over the socket: %v", err)
	}
}

// rawRequest writes one HTTP request by hand on c and reads the answer's
// status line and headers.
func rawRequest(c net.Conn, br *bufio.Reader, req string) (*http.Response, error) {
	if _, err := io.WriteString(c, req); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// waitClosed waits up to d for the peer to close c (a read returns an
// error other than a timeout), reading and discarding whatever comes.
func waitClosed(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

// A flood of connections that got a 401 and then sit idle, plus silent
// connections to the control socket, must neither exhaust proxyd's
// descriptors nor lock out clients: the endpoint serves a client with the
// token and the socket answers status.
func TestConnectionFloodLeavesEndpointAndSocketAnswering(t *testing.T) {
	const nofile = 256
	e := newEnv(t)
	e.writeConfig("listen: 127.0.0.1:0\n")
	p := e.startProxydNofile(nofile)
	ci := e.connectInfo()
	u, _ := url.Parse(ci.URL)
	pid := p.cmd.Process.Pid
	baseline := openFDs(t, pid)

	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	unauthorized := 0
	deadline := time.Now().Add(15 * time.Second) // for the whole flood
	for range 2 * nofile {
		c, err := net.DialTimeout("tcp", u.Host, time.Until(deadline))
		if err != nil {
			t.Fatalf("dialing the endpoint: %v", err)
		}
		conns = append(conns, c)
		_ = c.SetDeadline(deadline)
		resp, err := rawRequest(c, bufio.NewReader(c), "POST /mcp HTTP/1.1\r\nHost: "+u.Host+"\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
		if err == nil && resp.StatusCode == http.StatusUnauthorized {
			unauthorized++
		}
	}
	if unauthorized < nofile {
		t.Fatalf("only %d of %d flood requests got their 401", unauthorized, 2*nofile)
	}
	for range nofile {
		c, err := net.DialTimeout("unix", e.Socket, 5*time.Second)
		if err != nil {
			t.Fatalf("dialing the socket: %v", err)
		}
		conns = append(conns, c)
	}

	e.statusWithin(5 * time.Second)
	st := e.status()
	if st.PID != pid {
		t.Fatalf("status from pid %d, want %d", st.PID, pid)
	}
	// A client with the token still gets in on a fresh connection.
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`
	resp, err := rawRequest(c, bufio.NewReader(c), fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\n%s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s",
		u.Host, ci.Header, len(body), body))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize with the token during the flood: %v %v", resp, err)
	}
	during := openFDs(t, pid)
	t.Logf("proxyd descriptors: %d at rest, %d during a flood of %d connections (limit %d)", baseline, during, len(conns), nofile)
	if during >= nofile-32 {
		t.Errorf("proxyd holds %d descriptors during the flood, too close to its limit of %d", during, nofile)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	e.waitFor("proxyd's descriptors to return to their baseline", func() (bool, string) {
		n := openFDs(t, pid)
		return n <= baseline+2, fmt.Sprintf("%d descriptors, baseline %d", n, baseline)
	})
}

// Keep-alive connections are closed after limits.idle_timeout, and a body
// sent slower than limits.read_timeout is dropped even with the token, on
// the endpoint and on the socket.
func TestIdleAndSlowConnectionsDropped(t *testing.T) {
	e := newEnv(t)
	e.writeConfig("listen: 127.0.0.1:0\nlimits:\n  idle_timeout: 300ms\n  read_timeout: 300ms\n")
	e.startProxyd()
	ci := e.connectInfo()
	u, _ := url.Parse(ci.URL)

	t.Run("idle after a 401", func(t *testing.T) {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := rawRequest(c, bufio.NewReader(c), "GET /mcp HTTP/1.1\r\nHost: "+u.Host+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if !waitClosed(c, 10*time.Second) {
			t.Fatal("an idle connection stayed open past limits.idle_timeout")
		}
	})
	drip := func(t *testing.T, network, addr, head string) {
		c, err := net.Dial(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, head+"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		closed := make(chan bool, 1)
		go func() { closed <- waitClosed(c, 10*time.Second) }()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case ok := <-closed:
				if !ok {
					t.Fatal("a body dripping one byte per 50ms was read for 10s")
				}
				return
			case <-tick.C:
				_, _ = c.Write([]byte(" "))
			}
		}
	}
	t.Run("slow body with the token", func(t *testing.T) {
		drip(t, "tcp", u.Host, fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\n%s\r\n", u.Host, ci.Header))
	})
	t.Run("slow body on the socket", func(t *testing.T) {
		drip(t, "unix", e.Socket, "POST /v1/call HTTP/1.1\r\nHost: proxyd.sock\r\n")
	})
	e.statusWithin(5 * time.Second)
	if s := strings.TrimSpace(e.mustRun("status").stdout); s == "" {
		t.Fatal("empty status")
	}
}

// mcpPost posts one JSON-RPC body to the endpoint with the token.
func mcpPost(t *testing.T, ci api.ConnectInfo, sid string, body io.Reader, size int64) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, ci.URL, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	for k, v := range bearerHeader(ci) {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", ci.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// echoCall is a tools/call of the fixture's echo with a text of n bytes.
func echoCall(n int) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fixture__echo","arguments":{"text":"` + strings.Repeat("x", n) + `"}}}`
}

// One request-size limit holds on every path: the fast path, the MCP
// library's path (bodies over 1 MB, chunked bodies), the stdio bridge and
// the control socket. A larger request is answered 413 with a JSON-RPC
// error and never reaches the upstream.
func TestRequestSizeLimitOnEveryPath(t *testing.T) {
	fx := startFixture(t, mcpserver.EraLegacy)
	e := newEnv(t)
	e.writeConfig(fixtureConfig(fx.URL(), "legacy") + "limits:\n  max_request_bytes: 3000000\n")
	e.startProxyd()
	e.waitServer("fixture", api.StateReady)
	ci := e.connectInfo()

	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`
	resp, _ := mcpPost(t, ci, "", strings.NewReader(init), int64(len(init)))
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	cases := []struct {
		name    string
		size    int
		chunked bool
		want    int
	}{
		{"fast path", 1000, false, http.StatusOK},
		{"library path under the limit", 2_000_000, false, http.StatusOK},
		{"over the limit", 4_000_000, false, http.StatusRequestEntityTooLarge},
		{"chunked over the limit", 4_000_000, true, http.StatusRequestEntityTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := fx.Stats().Executions[mcpserver.ToolEcho]
			body := echoCall(c.size)
			size := int64(len(body))
			if c.chunked {
				size = -1
			}
			resp, b := mcpPost(t, ci, sid, strings.NewReader(body), size)
			if resp.StatusCode != c.want {
				t.Fatalf("status %d, want %d: %.300s", resp.StatusCode, c.want, b)
			}
			after := fx.Stats().Executions[mcpserver.ToolEcho]
			if c.want == http.StatusOK {
				if after != before+1 {
					t.Fatalf("the upstream ran echo %d times, want 1", after-before)
				}
				return
			}
			if after != before {
				t.Fatalf("a refused request reached the upstream (%d executions)", after-before)
			}
			var msg struct {
				JSONRPC string `json:"jsonrpc"`
				Error   struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &msg); err != nil || msg.JSONRPC != "2.0" || msg.Error.Code != -32600 ||
				!strings.Contains(msg.Error.Message, "max_request_bytes") {
				t.Fatalf("want a JSON-RPC error naming max_request_bytes, got %v: %.300s", err, b)
			}
		})
	}
	t.Run("control socket", func(t *testing.T) {
		hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", e.Socket)
		}}}
		for _, path := range []string{"/v1/call", "/v1/mcp"} {
			body := echoCall(4_000_000)
			resp, err := hc.Post("http://proxyd.sock"+path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "max_request_bytes") {
				t.Fatalf("%s: status %d, want 413 naming the limit: %.300s", path, resp.StatusCode, b)
			}
		}
	})
}

// With activity.durability: sync, every call a client saw finish is in the
// activity log after a SIGKILL and a restart.
func TestSyncDurabilityKeepsEveryRecordAcrossSIGKILL(t *testing.T) {
	fx := startFixture(t, mcpserver.EraLegacy)
	e := newEnv(t)
	e.writeConfig(fixtureConfig(fx.URL(), "legacy") + "activity:\n  durability: sync\n")
	p := e.startProxyd()
	e.waitServer("fixture", api.StateReady)
	ci := e.connectInfo()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`
	resp, _ := mcpPost(t, ci, "", strings.NewReader(init), int64(len(init)))
	sid := resp.Header.Get("Mcp-Session-Id")
	const calls = 40
	done := make(chan error, calls)
	for i := range calls {
		go func() {
			body := strings.Replace(echoCall(10), `"id":7`, fmt.Sprintf(`"id":%d`, 100+i), 1)
			resp, b := mcpPost(t, ci, sid, strings.NewReader(body), int64(len(body)))
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "xxxxxxxxxx") {
				done <- fmt.Errorf("call %d: %d %s", i, resp.StatusCode, b)
				return
			}
			done <- nil
		}()
	}
	for range calls {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// The moment the last answer arrived: no time for a batch to be due.
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.wait(t, 10*time.Second)
	e.startProxyd()
	if n := len(e.activityRecords()); n != calls {
		t.Fatalf("%d of %d finished calls in the activity log after SIGKILL", n, calls)
	}
}
