package upstream

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpx-dev/mcpx/internal/mediatype"
)

// A legacy upstream built on the MCP library sends a call's notifications
// on whichever of the call's answer and proxyd's standing GET stream takes
// them first (the spec asks GET-stream messages to be unrelated to running
// requests). Nothing orders two connections: proxyd could read a call's
// result before a notification the upstream had written on the GET stream
// earlier, and the notification, routed after the call's end, was lost.
// So before such a call's result goes back, the readers of the standing
// streams take in what had reached proxyd by then (settle). What the
// upstream writes after the result cannot be ordered and is not waited for.

// settleRounds and settleMax bound the wait for the standing streams'
// readers: a stream the upstream floods never settles, and each call waits
// at most a few of its reads.
const (
	settleRounds = 4
	settleMax    = 100 * time.Millisecond
)

// standings are a connection's open standing streams (usually one).
type standings struct {
	mu      sync.Mutex
	streams map[*standingStream]struct{}
}

func (s *standings) add(st *standingStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams == nil {
		s.streams = map[*standingStream]struct{}{}
	}
	s.streams[st] = struct{}{}
}

func (s *standings) remove(st *standingStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.streams, st)
}

// settle returns once each standing stream's reader has handled what had
// arrived for it (see standingStream.pending), within the bounds above.
func (s *standings) settle(ctx context.Context) {
	s.mu.Lock()
	if len(s.streams) == 0 {
		s.mu.Unlock()
		return
	}
	open := make([]*standingStream, 0, len(s.streams))
	for st := range s.streams {
		open = append(open, st)
	}
	s.mu.Unlock()
	var timeout <-chan time.Time
	for _, st := range open {
		for range settleRounds {
			next := st.pending()
			if next == nil {
				break
			}
			if timeout == nil {
				t := time.NewTimer(settleMax)
				defer t.Stop()
				timeout = t.C
			}
			select {
			case <-next:
			case <-timeout:
				return
			case <-ctx.Done():
				return
			}
		}
	}
}

// standingStream is the body of a standing GET stream, watched for where
// its reader is. The MCP library's reader handles each event as soon as
// it has read it, and reads again only when it has handled every whole
// event it holds.
type standingStream struct {
	rc   io.ReadCloser
	list *standings
	// conn is the connection the stream came on: its bytes taken by the
	// reader are counted when it is the stream's alone (HTTP/1); shared
	// (HTTP/2) only what waits in the kernel is known.
	conn   net.Conn
	counts *countedConn

	mu      sync.Mutex
	reading bool  // the reader waits in Read
	taken   int64 // counts.taken when the reader last called Read
	entered chan struct{}
	ended   bool
}

// pending is nil when the stream's reader waits for more and has taken
// every byte that reached the connection (it has handled what came
// before); else a channel closed when the reader next calls Read.
func (st *standingStream) pending() <-chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ended || st.reading && st.settled() {
		return nil
	}
	if st.entered == nil {
		st.entered = make(chan struct{})
	}
	return st.entered
}

// settled: the reader, waiting in Read, has taken what reached the
// connection (with mu held).
func (st *standingStream) settled() bool {
	if st.counts != nil {
		if got := received(st.counts.Conn); got >= 0 {
			return st.taken >= got
		}
	}
	return unread(st.conn) == 0
}

func (st *standingStream) Read(p []byte) (int, error) {
	st.mu.Lock()
	st.reading = true
	if st.counts != nil {
		st.taken = st.counts.taken.Load()
	}
	if st.entered != nil {
		close(st.entered)
		st.entered = nil
	}
	st.mu.Unlock()
	n, err := st.rc.Read(p)
	st.mu.Lock()
	st.reading = false
	st.mu.Unlock()
	if err != nil {
		st.end()
	}
	return n, err
}

func (st *standingStream) Close() error {
	st.end()
	return st.rc.Close()
}

// end takes the stream off its connection's list and frees its waiters.
func (st *standingStream) end() {
	st.mu.Lock()
	first := !st.ended
	st.ended = true
	if st.entered != nil {
		close(st.entered)
		st.entered = nil
	}
	st.mu.Unlock()
	if first {
		st.list.remove(st)
	}
}

// standingTransport watches the GET event streams of a connection (its
// calls' resumed answers are marked callStream and left alone).
type standingTransport struct {
	next http.RoundTripper
	list *standings
}

// callStreamKey marks a GET that resumes a call's own answer.
type callStreamKey struct{}

func (t standingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.Context().Value(callStreamKey{}) != nil {
		return t.next.RoundTrip(req)
	}
	var conn net.Conn // set before RoundTrip returns a response
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { conn = info.Conn }}
	resp, err := t.next.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	if err != nil || resp.Body == nil || resp.Body == http.NoBody || resp.StatusCode != http.StatusOK ||
		mediatype.Of(resp.Header.Get("Content-Type")) != "text/event-stream" {
		return resp, err
	}
	st := &standingStream{rc: resp.Body, list: t.list, conn: conn}
	raw := conn
	if tc, ok := conn.(*tls.Conn); ok {
		raw = tc.NetConn()
		if tc.ConnectionState().NegotiatedProtocol == "h2" {
			raw = nil // shared with the calls' own streams
		}
	}
	st.counts, _ = raw.(*countedConn)
	t.list.add(st)
	resp.Body = st
	return resp, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// wrapped transport.
func (t standingTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// countedConn counts the bytes its reader has taken from the kernel.
type countedConn struct {
	net.Conn
	taken atomic.Int64
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.taken.Add(int64(n))
	return n, err
}

// countingDialer dials connections that count what is read from them.
func countingDialer(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countedConn{Conn: c}, nil
	}
}
