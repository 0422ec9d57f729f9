package inbound

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
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

// A client that stops reading is cut off after the stall bound: the
// handler's write fails, its context ends, the hook hears of it once.
// One that reads slowly, or waits between requests longer than the
// bound, is served in full.
func TestBoundWrites(t *testing.T) {
	const stall = 400 * time.Millisecond
	written := make(chan error, 4)
	var cuts atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Limit(ln, 8)
	l.BoundWrites(stall, func(remote net.Addr, after time.Duration) {
		if after != stall || remote == nil {
			t.Errorf("stall hook told %v after %v", remote, after)
		}
		cuts.Add(1)
	})
	srv := Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if ms, _ := strconv.Atoi(r.URL.Query().Get("deadline")); ms > 0 {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Duration(ms) * time.Millisecond))
		}
		w.Header().Set("Content-Length", fmt.Sprint(n))
		_, err := w.Write(make([]byte, n))
		if err == nil {
			err = http.NewResponseController(w).Flush()
		}
		if err != nil && r.Context().Err() == nil {
			err = fmt.Errorf("write failed (%w) but the request's context goes on", err)
		}
		written <- err
	}), 5*time.Second, time.Minute, l)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()

	dial := func(t *testing.T) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	t.Run("stalled", func(t *testing.T) {
		// Far more than the sockets hold while the client reads nothing.
		const answer = 32 << 20
		c := dial(t)
		fmt.Fprintf(c, "GET /?n=%d HTTP/1.1\r\nHost: x\r\n\r\n", answer)
		select {
		case err := <-written:
			if err == nil || !strings.Contains(err.Error(), "timeout") {
				t.Fatalf("the write to a client that does not read ended with %v, want its timeout", err)
			}
		case <-time.After(20 * stall):
			t.Fatal("the write to a client that does not read is still waiting")
		}
		if cuts.Load() != 1 {
			t.Fatalf("the stall hook ran %d times, want once", cuts.Load())
		}
		n, _ := io.Copy(io.Discard, c) // what the kernel held, then the end
		if n >= answer {
			t.Fatalf("the stalled client still got the whole answer (%d bytes)", n)
		}
		waitfor.True(t, 5*time.Second, "the connection's slot to be given back", func() bool { return l.Open() == 0 })
	})

	t.Run("a handler's own deadline", func(t *testing.T) {
		// A write deadline the handler set is kept to instead of the
		// bound: the write to a client that reads nothing fails at it,
		// not earlier, and the connection is not counted as cut.
		cuts.Store(0)
		c := dial(t)
		start := time.Now()
		fmt.Fprintf(c, "GET /?n=%d&deadline=%d HTTP/1.1\r\nHost: x\r\n\r\n", 32<<20, 3*stall.Milliseconds())
		select {
		case err := <-written:
			if err == nil || time.Since(start) < 3*stall || cuts.Load() != 0 {
				t.Fatalf("the write ended with %v after %v, %d cut; want the handler's deadline (%v) and no cut", err, time.Since(start), cuts.Load(), 3*stall)
			}
		case <-time.After(20 * stall):
			t.Fatal("the write to a client that does not read is still waiting")
		}
	})

	t.Run("slow reader", func(t *testing.T) {
		cuts.Store(0)
		// 256 KiB every 20 ms into a fixed receive buffer: the answer
		// takes about three times the bound, and no 64 KiB of it waits
		// more than a fraction of it (a bound on the whole write, which
		// goes to the socket as one, would cut it).
		const answer, step = 16 << 20, 256 << 10
		c := dial(t)
		if err := c.(*net.TCPConn).SetReadBuffer(step); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /?n=%d HTTP/1.1\r\nHost: x\r\n\r\n", answer)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		br := bufio.NewReaderSize(c, step)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got int64
		for {
			<-tick.C
			n, err := io.CopyN(io.Discard, resp.Body, step)
			got += n
			if err != nil {
				break
			}
		}
		if got != answer || cuts.Load() != 0 {
			t.Fatalf("the slow reader got %d of %d bytes; %d cut", got, answer, cuts.Load())
		}
		if err := <-written; err != nil {
			t.Fatal(err)
		}

		// The same connection after a pause longer than the bound (the
		// deadline set for the answer above has passed; it must be moved,
		// not cut the next answer at once).
		<-time.After(2 * stall)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET /?n=10 HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("a request after a pause on the same connection: %v %v", resp, err)
		}
		if err := <-written; err != nil || cuts.Load() != 0 {
			t.Fatalf("the answer after a pause: %v; %d cut", err, cuts.Load())
		}
	})
}
