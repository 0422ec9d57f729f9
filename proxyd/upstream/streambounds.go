package upstream

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/callerr"
)

// streamBounds bound the event streams (text/event-stream bodies) of one
// upstream, whatever reads them: an SSE event (and so each of its lines)
// holds at most maxEvent bytes, and a standing stream (a GET) must end a
// line within idle. Without them one endless line grows proxyd's memory
// until it dies.
type streamBounds struct {
	maxEvent int64
	idle     time.Duration
	// onBreach hears of a standing stream that broke a bound: the
	// connection is dropped and connected again after a backoff.
	onBreach func(error)
	// onIdle hears of a standing stream closed for silence; the MCP
	// library opens it again.
	onIdle func()
}

// boundedStreams applies b to every event stream next returns. A call's
// breach is recorded on its recorder, for classification.
type boundedStreams struct {
	next http.RoundTripper
	b    streamBounds
}

func (t boundedStreams) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil || resp.Body == http.NoBody {
		return resp, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return resp, nil
	}
	s := &boundedStream{rc: resp.Body, max: t.b.maxEvent, rec: callerr.RecorderFrom(req.Context())}
	if req.Method == http.MethodGet {
		s.onBreach, s.onIdle = t.b.onBreach, t.b.onIdle
		if t.b.idle > 0 {
			s.idle = t.b.idle
			s.timer = time.AfterFunc(t.b.idle, s.expire)
		}
	}
	resp.Body = s
	return resp, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// wrapped transport.
func (t boundedStreams) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Why a standing stream's timer fired.
const (
	streamLive int32 = iota
	streamSilent
	streamDripping
)

// boundedStream counts the bytes of the current line and event as they
// are read; it keeps no copy of them.
type boundedStream struct {
	rc  io.ReadCloser
	max int64
	rec *callerr.Recorder

	line, event int64 // bytes of the current line and event so far
	lastCR      bool  // the last byte read was '\r'
	err         error // sticky, once the stream broke a bound

	// Standing streams only.
	idle     time.Duration
	timer    *time.Timer
	partial  atomic.Bool  // bytes arrived since the last newline
	expired  atomic.Int32 // streamSilent or streamDripping once the timer fired
	onBreach func(error)
	onIdle   func()
	once     sync.Once
}

func (s *boundedStream) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.rc.Read(p)
	if n > 0 {
		if berr := s.scan(p[:n]); berr != nil {
			return 0, s.fail(berr)
		}
	}
	if err != nil {
		switch s.expired.Load() {
		case streamDripping:
			return n, s.fail(s.limitErr("a line of the standing event stream did not end within stream_idle_timeout (%s): the upstream drips bytes without ending it", s.idle))
		case streamSilent:
			return n, io.EOF
		}
	}
	return n, err
}

// scan counts b into the current line and event.
func (s *boundedStream) scan(b []byte) *callerr.LimitError {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			s.line += int64(len(b))
			s.event += int64(len(b))
			s.lastCR = b[len(b)-1] == '\r'
			s.partial.Store(true)
			break
		}
		s.line += int64(i)
		cr := s.lastCR
		if i > 0 {
			cr = b[i-1] == '\r'
		}
		if s.line == 0 || s.line == 1 && cr {
			s.event = 0 // a blank line ends the event
		} else {
			s.event += int64(i) + 1
		}
		if err := s.check(); err != nil {
			return err
		}
		s.line, s.lastCR = 0, false
		s.partial.Store(false)
		if s.timer != nil {
			s.timer.Reset(s.idle)
		}
		b = b[i+1:]
	}
	return s.check()
}

func (s *boundedStream) check() *callerr.LimitError {
	switch {
	case s.line > s.max:
		return s.limitErr("an event-stream line longer than max_response_bytes (%d bytes)", s.max)
	case s.event > s.max && !(s.line == 1 && s.lastCR): // a lone CR may start a blank line
		return s.limitErr("an event-stream event longer than max_response_bytes (%d bytes)", s.max)
	}
	return nil
}

func (s *boundedStream) limitErr(format string, a ...any) *callerr.LimitError {
	limit := "max_response_bytes"
	if s.expired.Load() == streamDripping {
		limit = "stream_idle_timeout"
	}
	return &callerr.LimitError{Limit: limit, Reason: fmt.Sprintf(format, a...) + "; proxyd dropped the stream"}
}

// fail ends the stream: the connection under it is closed, the call's
// recorder and the connection's owner hear why.
func (s *boundedStream) fail(e *callerr.LimitError) error {
	s.err = e
	s.rec.RecordLimit(e)
	s.Close()
	s.once.Do(func() {
		if s.onBreach != nil {
			s.onBreach(e)
		}
	})
	return e
}

// expire runs when a standing stream went idle without a complete line.
func (s *boundedStream) expire() {
	if s.partial.Load() {
		s.expired.Store(streamDripping)
	} else {
		s.expired.Store(streamSilent)
		if s.onIdle != nil {
			s.onIdle()
		}
	}
	_ = s.rc.Close()
}

func (s *boundedStream) Close() error {
	if s.timer != nil {
		s.timer.Stop()
	}
	return s.rc.Close()
}
