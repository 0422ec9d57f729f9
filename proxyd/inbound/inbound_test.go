package inbound

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/internal/waitfor"
)

func TestBudget(t *testing.T) {
	cases := []struct {
		nofile, want        int
		socket, endpoint    int
		endpointBelowNofile bool
	}{
		{nofile: 0, want: 1024, socket: 128, endpoint: 1024},
		{nofile: 1 << 20, want: 1024, socket: 128, endpoint: 1024, endpointBelowNofile: true},
		{nofile: 4096, want: 8192, socket: 128, endpoint: 1952, endpointBelowNofile: true},
		{nofile: 1024, want: 1024, socket: 128, endpoint: 416, endpointBelowNofile: true},
		{nofile: 256, want: 1024, socket: 64, endpoint: 64, endpointBelowNofile: true},
		{nofile: 16, want: 1024, socket: 4, endpoint: 4},
	}
	for _, c := range cases {
		s, e := Budget(c.nofile, c.want)
		if s != c.socket || e != c.endpoint {
			t.Errorf("Budget(%d, %d) = %d, %d; want %d, %d", c.nofile, c.want, s, e, c.socket, c.endpoint)
		}
		if c.endpointBelowNofile && s+2*e >= c.nofile {
			t.Errorf("Budget(%d, %d): %d socket + 2x%d endpoint connections reach the limit", c.nofile, c.want, s, e)
		}
	}
}

// serve runs an http.Server on a capped loopback listener.
func serve(t *testing.T, max int, h http.Handler) (*Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Limit(ln, max)
	srv := Server(h, 5*time.Second, time.Minute, l)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l, ln.Addr().String()
}

func get(c net.Conn, br *bufio.Reader) (int, error) {
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// At the cap, the connection idle longest makes room; a busy one is never
// closed, and the cap holds.
func TestListenerEvictsIdleNotBusy(t *testing.T) {
	release := make(chan struct{})
	l, addr := serve(t, 3, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("hold") {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-release
		}
	}))
	defer close(release)

	busy, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	io.WriteString(busy, "GET /?hold HTTP/1.1\r\nHost: x\r\n\r\n")
	bbr := bufio.NewReader(busy)
	if resp, err := http.ReadResponse(bbr, nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("busy request: %v %v", resp, err)
	}
	var idle []net.Conn
	for range 10 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if code, err := get(c, bufio.NewReader(c)); err != nil || code != http.StatusOK {
			t.Fatalf("request %d: %d %v", len(idle), code, err)
		}
		idle = append(idle, c)
		if l.Open() > l.Cap() {
			t.Fatalf("%d connections open, cap %d", l.Open(), l.Cap())
		}
	}
	// The busy stream is still served.
	busy.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := bbr.ReadByte(); err == nil || !isTimeout(err) {
		t.Fatalf("the busy connection was closed: %v", err)
	}
	// The oldest idle ones were closed to make room.
	if !closedByPeer(idle[0]) {
		t.Fatal("the oldest idle connection is still open")
	}
	waitfor.True(t, 5*time.Second, "open connections at the cap", func() bool { return l.Open() <= l.Cap() })
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func closedByPeer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !isTimeout(err)
}

func TestBodiesLimit(t *testing.T) {
	var got int
	h := Bodies(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got = len(b)
	}), 100, 5*time.Second, func(w http.ResponseWriter, r *http.Request, limit int64) {
		http.Error(w, fmt.Sprintf("over %d", limit), http.StatusRequestEntityTooLarge)
	})
	_, addr := serve(t, 8, h)
	cases := []struct {
		name    string
		body    string
		chunked bool
		want    int
	}{
		{"at the limit", strings.Repeat("x", 100), false, http.StatusOK},
		{"over the limit", strings.Repeat("x", 101), false, http.StatusRequestEntityTooLarge},
		{"chunked at the limit", strings.Repeat("x", 100), true, http.StatusOK},
		{"chunked over the limit", strings.Repeat("x", 5000), true, http.StatusRequestEntityTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got = -1
			var body io.Reader = strings.NewReader(c.body)
			if c.chunked {
				body = io.MultiReader(body) // hides the length: sent chunked
			}
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", body)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.want)
			}
			if c.want == http.StatusOK && got != len(c.body) {
				t.Fatalf("handler read %d bytes, want %d", got, len(c.body))
			}
		})
	}
}

// The body's deadline is lifted once it is read: a handler that runs past
// it keeps its connection and its context.
func TestBodiesDeadlineLiftedAfterRead(t *testing.T) {
	h := Bodies(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
			http.Error(w, "cancelled", http.StatusServiceUnavailable)
		case <-time.After(300 * time.Millisecond): // longer than the body's deadline
			w.WriteHeader(http.StatusOK)
		}
	}), 100, 100*time.Millisecond, nil)
	_, addr := serve(t, 8, h)
	resp, err := http.Post("http://"+addr+"/", "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
}
