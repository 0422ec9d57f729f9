package upstream

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcpx-dev/mcpx/internal/mediatype"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// A legacy upstream built on the MCP library sends a call's notifications
// on whichever of the call's answer and proxyd's standing GET stream takes
// them first (the spec asks GET-stream messages to be unrelated to running
// requests). Nothing orders two connections: proxyd could read a call's
// result before a notification the upstream had written on the GET stream
// earlier, and the notification, routed after the call's end, was lost.
// So the standing stream's progress and log notifications are routed by
// proxyd as the stream is read, before the MCP library sees the stream,
// and before the result of a call that can get them goes back, the
// stream's reader takes in what had reached proxyd by then (settle).
// What the upstream writes after the result cannot be ordered and is not
// waited for. Once the connection is ready, every request and
// notification on the stream is taken there too, as it came (the library
// would decode it into maps: see stdioLink); the library gets the rest.

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

// standingStream is the body of a standing GET stream, read by the MCP
// library's listener. It routes the stream's requests and notifications
// itself (route) and passes every other event on unchanged.
type standingStream struct {
	rc    io.ReadCloser
	list  *standings
	route func(m relay.Message) bool // true: taken, not passed on
	onEnd func(err error)            // called once when the stream ends, with the read's error (nil: closed); nil: nothing to do
	// counts is the connection the stream came on, when it is the
	// stream's alone (HTTP/1): its bytes taken by the reader are counted.
	counts *countedConn

	// Owned by the reader.
	buf   []byte // each read's
	in    []byte // read, not yet a whole line
	event []byte // the current event's lines as read
	data  []byte // the current event's data lines joined
	out   []byte // whole events for the library, not yet read by it
	err   error

	mu      sync.Mutex
	reading bool  // the reader waits for the upstream with nothing in hand
	taken   int64 // counts.taken when it began to
	entered chan struct{}
	ended   bool
}

// pending is nil when the stream's reader waits for the upstream and has
// taken every byte that reached the connection (it has routed what came
// before); else a channel closed when the reader next waits.
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

// settled: the reader, waiting for the upstream, has taken what reached
// the connection (with mu held). Where that is not known (a shared
// connection, a kernel not asked), its waiting is taken as enough.
func (st *standingStream) settled() bool {
	if st.counts != nil {
		if got := received(st.counts.raw); got >= 0 {
			return st.taken >= got
		}
	}
	return true
}

func (st *standingStream) Read(p []byte) (int, error) {
	for len(st.out) == 0 && st.err == nil {
		st.fill()
	}
	if len(st.out) == 0 {
		return 0, st.err
	}
	n := copy(p, st.out)
	st.out = st.out[n:]
	return n, nil
}

// fill reads from the upstream once and sorts the whole lines read.
func (st *standingStream) fill() {
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
	if st.buf == nil {
		st.buf = make([]byte, 4096)
	}
	n, err := st.rc.Read(st.buf)
	st.mu.Lock()
	st.reading = false
	st.mu.Unlock()
	// Only what follows a newline is scanned: a long line read in many
	// pieces is not searched again from its start.
	from := len(st.in)
	st.in = append(st.in, st.buf[:n]...)
	start := 0
	for {
		i := bytes.IndexByte(st.in[from:], '\n')
		if i < 0 {
			break
		}
		st.line(st.in[start : from+i+1])
		start, from = from+i+1, from+i+1
	}
	if start > 0 {
		st.in = st.in[:copy(st.in, st.in[start:])] // the lines taken go
		if cap(st.in) > pooledBufMax {
			st.in = bytes.Clone(st.in) // and a long one's room with them
		}
	}
	if err != nil {
		// What is left (an event without its blank line) goes to the
		// library as it is, which decides what it means.
		st.out = append(append(st.out, st.event...), st.in...)
		st.event, st.in, st.err = nil, nil, err
		st.end(err)
	}
}

// line takes one line of the stream (with its end): a blank one ends the
// event, which is routed or passed on.
func (st *standingStream) line(l []byte) {
	st.event = append(st.event, l...)
	text := bytes.TrimSuffix(bytes.TrimSuffix(l, []byte("\n")), []byte("\r"))
	if len(text) > 0 {
		if v, ok := bytes.CutPrefix(text, []byte("data:")); ok {
			if len(st.data) > 0 {
				st.data = append(st.data, '\n')
			}
			st.data = append(st.data, bytes.TrimPrefix(v, []byte(" "))...)
		}
		return
	}
	taken := false
	// What is taken outlives the event's buffer.
	if m, err := relay.ParseMessage(bytes.Clone(st.data)); err == nil {
		taken = st.route(m)
	}
	if !taken {
		st.out = append(st.out, st.event...)
	}
	st.event, st.data = st.event[:0], st.data[:0]
}

func (st *standingStream) Close() error {
	st.end(nil)
	return st.rc.Close()
}

// end takes the stream off its connection's list and frees its waiters.
func (st *standingStream) end(err error) {
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
		if st.onEnd != nil {
			st.onEnd(err)
		}
	}
}

// standingTransport watches the GET event streams of a connection (its
// calls' resumed answers are marked callStream and left alone).
type standingTransport struct {
	next  http.RoundTripper
	list  *standings
	route func(m relay.Message) bool
	onEnd func(error) // see standingStream.onEnd
	// failed hears why a GET for the stream could not be made: the MCP
	// library opens it again every second by itself, and a refused one is
	// how a server that went away shows while no call is made.
	failed func(error)
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
	if err != nil && t.failed != nil {
		t.failed(err)
	}
	if err != nil || resp.Body == nil || resp.Body == http.NoBody || resp.StatusCode != http.StatusOK ||
		mediatype.Of(resp.Header.Get("Content-Type")) != "text/event-stream" {
		return resp, err
	}
	st := &standingStream{rc: resp.Body, list: t.list, route: t.route, onEnd: t.onEnd}
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
	raw   syscall.RawConn // for asking the kernel (received); nil if none
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
		cc := &countedConn{Conn: c}
		if sc, ok := c.(syscall.Conn); ok {
			cc.raw, _ = sc.SyscallConn()
		}
		return cc, nil
	}
}
