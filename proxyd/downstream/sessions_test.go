package downstream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/internal/waitfor"
)

// sessionServer serves the endpoint with the given session bounds and a
// clock the test moves.
type sessionServer struct {
	t   *testing.T
	s   *Server
	url string

	mu  sync.Mutex
	now time.Time
}

func newSessionServer(t *testing.T, max int, idle time.Duration) *sessionServer {
	return newSessionServerOf(t, hintBackend{}, max, idle)
}

func newSessionServerOf(t *testing.T, b Backend, max int, idle time.Duration) *sessionServer {
	t.Helper()
	ss := &sessionServer{t: t, now: time.Unix(1_000_000, 0)}
	ss.s = New(b, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	ss.s.Sync()
	ss.s.SetSessionLimits(max, idle)
	ss.s.sessions.now = ss.clock
	srv := httptest.NewServer(ss.s.Handler("", ""))
	t.Cleanup(srv.Close)
	ss.url = srv.URL + "/mcp"
	return ss
}

func (ss *sessionServer) clock() time.Time {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.now
}

func (ss *sessionServer) advance(d time.Duration) {
	ss.mu.Lock()
	ss.now = ss.now.Add(d)
	ss.mu.Unlock()
}

func (ss *sessionServer) post(sid, body string) *http.Response {
	ss.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ss.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ss.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// initialize opens a legacy-era session without ever ending it, as most
// clients do.
func (ss *sessionServer) initialize() string {
	ss.t.Helper()
	resp := ss.post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		ss.t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	return sid
}

// use sends a request on the session and returns its HTTP status.
func (ss *sessionServer) use(sid string) int {
	ss.t.Helper()
	return ss.post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`).StatusCode
}

// status sends a legacy request without a body (a GET stream, a DELETE)
// on session sid ("": none) and returns its HTTP status; a stream it
// opens ends when it returns.
func (ss *sessionServer) status(method, sid string) int {
	ss.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, ss.url, nil)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ss.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (ss *sessionServer) counts() string {
	live, lib := ss.s.Sessions()
	return fmt.Sprintf("%d live, %d in the library", live, lib)
}

// At the cap the least recently used session ends, in proxyd and in the
// library alike; a session in use survives any number of new ones.
func TestSessionCapEvictsLeastRecentlyUsed(t *testing.T) {
	const max = 20
	ss := newSessionServer(t, max, time.Hour)
	kept := ss.initialize()
	early := ss.initialize()
	for i := range 10 * max {
		ss.advance(time.Second)
		ss.initialize()
		if i%5 == 0 {
			if code := ss.use(kept); code != http.StatusOK {
				t.Fatalf("the session in use got %d after %d new sessions", code, i+1)
			}
		}
	}
	live, lib := ss.s.Sessions()
	if live > max || lib > max {
		t.Fatalf("%s; the cap is %d", ss.counts(), max)
	}
	if code := ss.use(early); code != http.StatusNotFound {
		t.Fatalf("an evicted session got %d, want 404 (initialize again)", code)
	}
	if code := ss.use(kept); code != http.StatusOK {
		t.Fatalf("the session in use got %d", code)
	}
}

// heldBackend holds every relayed call until release is closed, telling
// started when one is in flight.
type heldBackend struct {
	hintBackend
	started chan struct{}
	release chan struct{}
}

func (b heldBackend) Relay(ctx context.Context, _ *Call) (json.RawMessage, error) {
	b.started <- struct{}{}
	select {
	case <-b.release:
		return json.RawMessage(`{"content":[{"type":"text","text":"held"}]}`), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A session waiting for a call's answer is in use: new sessions past the
// cap, and its idle time, evict others, not it, and its call is not
// cancelled.
func TestSessionWithACallInFlightIsNotEvicted(t *testing.T) {
	const max = 5
	b := heldBackend{started: make(chan struct{}, 1), release: make(chan struct{})}
	ss := newSessionServerOf(t, b, max, time.Minute)
	waiting := ss.initialize()
	answer := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, ss.url, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", waiting)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answer <- err.Error()
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		answer <- string(body)
	}()
	<-b.started
	ss.advance(2 * time.Minute)
	for range 4 * max {
		ss.advance(time.Second)
		ss.initialize()
	}
	close(b.release)
	if got := <-answer; !strings.Contains(got, `"text":"held"`) {
		t.Fatalf("the call in flight got %s, want its answer", got)
	}
	if code := ss.use(waiting); code != http.StatusOK {
		t.Fatalf("the session that waited got %d after its call", code)
	}
}

// Sessions idle past the timeout end, in proxyd and in the library; one
// listening on its GET stream is in use however quiet it is.
func TestIdleSessionsExpire(t *testing.T) {
	ss := newSessionServer(t, 100, time.Minute)
	var idle []string
	for range 10 {
		idle = append(idle, ss.initialize())
	}
	listening := ss.initialize()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ss.url, nil)
	req.Header.Set("Mcp-Session-Id", listening)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", resp, err)
	}
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		_, _ = io.Copy(io.Discard, bufio.NewReader(resp.Body))
	}()

	ss.advance(2 * time.Minute)
	fresh := ss.initialize()
	if code := ss.use(fresh); code != http.StatusOK {
		t.Fatalf("a fresh session got %d", code)
	}
	if live, lib := ss.s.Sessions(); live != 2 || lib != 2 {
		t.Fatalf("%s, want the fresh and the listening session only", ss.counts())
	}
	if code := ss.use(idle[0]); code != http.StatusNotFound {
		t.Fatalf("an expired session got %d, want 404", code)
	}
	if code := ss.use(listening); code != http.StatusOK {
		t.Fatalf("the listening session got %d", code)
	}

	cancel()
	<-streamDone
	resp.Body.Close()
	// The stream's end counts as use: it expires a timeout later.
	waitfor.True(t, 5*time.Second, "the GET stream to end on the server", func() bool {
		ss.s.sessions.mu.Lock()
		defer ss.s.sessions.mu.Unlock()
		sess, ok := ss.s.sessions.live[listening]
		return ok && sess.busy.Load() == 0
	})
	ss.advance(2 * time.Minute)
	ss.initialize()
	if code := ss.use(listening); code != http.StatusNotFound {
		t.Fatalf("the session idle since its stream ended got %d, want 404", code)
	}
}

// A GET stream for a session that does not exist (ended, expired, or given
// by a proxyd before a restart) is a 404, as for a POST, so the client
// starts a new session; one without a session id is a 400, as the spec
// has it; a live session gets its stream.
func TestGetStreamOfUnknownSessionIs404(t *testing.T) {
	ss := newSessionServer(t, 100, time.Minute)
	get := func(sid string) int { return ss.status(http.MethodGet, sid) }
	live := ss.initialize()
	// Never streamed: a session whose stream is open does not expire, and
	// the server may not have seen the live one's end yet.
	expiring := ss.initialize()
	if code := get(live); code != http.StatusOK {
		t.Fatalf("a live session's GET stream: %d", code)
	}
	if code := get("mcpx-s-not-a-session"); code != http.StatusNotFound {
		t.Fatalf("an unknown session's GET stream: %d, want 404", code)
	}
	if code := get("garbage"); code != http.StatusNotFound {
		t.Fatalf("a malformed session id's GET stream: %d, want 404", code)
	}
	before := ss.counts()
	if code := get(""); code != http.StatusBadRequest {
		t.Fatalf("a GET stream without a session id: %d, want 400", code)
	}
	if after := ss.counts(); after != before {
		t.Fatalf("a GET without a session id changed the sessions: %s, then %s", before, after)
	}
	ss.advance(2 * time.Minute)
	ss.initialize() // sessions expire as the next one starts
	if code := get(expiring); code != http.StatusNotFound {
		t.Fatalf("an expired session's GET stream: %d, want 404", code)
	}
}

// DELETE ends a live session once: the spec's 404 for a session that
// does not exist (ended, never given, or given by a proxyd before a
// restart) and 400 without a session id, where the library answered 200
// to any of them.
func TestDeleteOfUnknownSessionIs404(t *testing.T) {
	ss := newSessionServer(t, 100, time.Minute)
	del := func(sid string) int { return ss.status(http.MethodDelete, sid) }
	live := ss.initialize()
	for _, tt := range []struct {
		name, sid string
		want      int
	}{
		{"a live session", live, http.StatusOK},
		{"the same session again", live, http.StatusNotFound},
		{"a session never given", "mcpx-s-not-a-session", http.StatusNotFound},
		{"a malformed session id", "garbage", http.StatusNotFound},
		{"no session id", "", http.StatusBadRequest},
	} {
		if got := del(tt.sid); got != tt.want {
			t.Errorf("DELETE of %s: %d, want %d", tt.name, got, tt.want)
		}
	}
	if live, library := ss.s.Sessions(); live != 0 || library != 0 {
		t.Errorf("after DELETE: %s; want none", ss.counts())
	}
}

// A session has one GET stream: another ends the older (a client
// reconnecting while the old connection lingers), and the session's end
// (DELETE) ends the last, so no stream holds a connection forever.
func TestOneGetStreamPerSession(t *testing.T) {
	const token = testToken
	_, srv := startEndpoint(t, hintBackend{})
	t.Cleanup(srv.CloseClientConnections) // runs first: a stream left open fails the test, not hangs it
	sid := progressCall(t, srv.URL+"/mcp", false).Header.Get("Mcp-Session-Id")
	req := func(method string) *http.Request {
		r, _ := http.NewRequest(method, srv.URL+"/mcp", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		r.Header.Set("Accept", "text/event-stream")
		r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		r.Header.Set("Mcp-Session-Id", sid)
		return r
	}
	// open starts a GET stream and returns a channel closed when its body ends.
	open := func() <-chan struct{} {
		t.Helper()
		resp, err := http.DefaultClient.Do(req(http.MethodGet))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET stream: status %d", resp.StatusCode)
		}
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
		}()
		return ended
	}
	wait := func(ended <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ended:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: the stream is still open", what)
		}
	}
	first := open()
	second := open()
	wait(first, "a second GET stream on the session")
	select {
	case <-second:
		t.Fatal("the newer stream ended too")
	default:
	}
	resp, err := http.DefaultClient.Do(req(http.MethodDelete))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	wait(second, "DELETE of the session")
	if resp, err := http.DefaultClient.Do(req(http.MethodGet)); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET on the ended session: %v %v, want 404", resp.StatusCode, err)
	}
}

// GET streams are bounded (proxyd: half its connections), so sessions
// listening cannot take every connection from requests: one over the
// bound gets 503 at once, and a stream that ends makes room.
func TestStreamLimit(t *testing.T) {
	const token = testToken
	s, srv := startEndpoint(t, hintBackend{})
	s.SetStreamLimit(2)
	t.Cleanup(srv.CloseClientConnections)
	get := func(sid string) *http.Response {
		t.Helper()
		r, _ := http.NewRequest(http.MethodGet, srv.URL+"/mcp", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		r.Header.Set("Accept", "text/event-stream")
		r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		r.Header.Set("Mcp-Session-Id", sid)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	session := func() string { return progressCall(t, srv.URL+"/mcp", false).Header.Get("Mcp-Session-Id") }
	a, b := get(session()), get(session())
	defer b.Body.Close()
	if a.StatusCode != http.StatusOK || b.StatusCode != http.StatusOK {
		t.Fatalf("streams within the bound: %d %d", a.StatusCode, b.StatusCode)
	}
	c := get(session())
	body, _ := io.ReadAll(c.Body)
	c.Body.Close()
	if c.StatusCode != http.StatusServiceUnavailable || c.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "max_connections") {
		t.Fatalf("a stream over the bound: %d %q %s", c.StatusCode, c.Header.Get("Retry-After"), body)
	}
	a.Body.Close() // the client leaves: its stream ends, and makes room
	waitfor.True(t, 20*time.Second, "room for a stream once one ended", func() bool {
		d := get(session())
		defer d.Body.Close()
		return d.StatusCode == http.StatusOK
	})
}
