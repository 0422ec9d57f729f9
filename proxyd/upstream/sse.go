package upstream

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
)

// sseEvent is one Server-Sent Event of an upstream's response stream.
type sseEvent struct {
	id    string
	data  []byte // the data lines joined with "\n"
	retry time.Duration
	// hasID and hasRetry: the event set the field (an empty id resets it).
	hasID, hasRetry bool
}

// sseReader reads events from a response body, holding at most max bytes
// of one event's data.
type sseReader struct {
	r   *bufio.Reader
	max int
	buf []byte
	// idle, when set, runs before a read that may wait for the upstream
	// (no whole line is in hand).
	idle func()
}

// sseReaders keeps readers between answers: every streamed answer needs
// one, and its 4 KiB buffer was the largest allocation of such a call.
var sseReaders = sync.Pool{New: func() any { return &sseReader{r: bufio.NewReaderSize(nil, 4096)} }}

// pooledBufMax bounds the event buffer a reader keeps for the next answer.
const pooledBufMax = 64 << 10

func newSSEReader(body io.Reader, max int64) *sseReader {
	s := sseReaders.Get().(*sseReader)
	s.r.Reset(body)
	s.max, s.buf, s.idle = int(max), s.buf[:0], nil
	return s
}

// release hands s back for another answer; neither s nor an event's data
// it returned may be used after.
func (s *sseReader) release() {
	s.r.Reset(nil)
	s.idle = nil
	if cap(s.buf) > pooledBufMax {
		s.buf = nil
	}
	sseReaders.Put(s)
}

// next returns the next event with data (events without data, such as a
// priming event or a comment, only update id and retry, which are
// reported with the next event or at the end). It returns io.EOF at the
// end of the stream.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	s.buf = s.buf[:0]
	hasData := false
	for {
		line, err := s.line()
		if err != nil {
			if err == io.EOF && (hasData || ev.hasID || ev.hasRetry) {
				// A stream that ends without a blank line ends the event.
				if hasData {
					ev.data = s.buf
					return ev, nil
				}
				return ev, io.EOF
			}
			return ev, err
		}
		if len(line) == 0 {
			if hasData {
				ev.data = s.buf
				return ev, nil
			}
			if ev.hasID || ev.hasRetry {
				// A data-less event still moves the cursor.
				return ev, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if hasData {
				s.buf = append(s.buf, '\n')
			}
			if len(s.buf)+len(value) > s.max {
				return ev, fmt.Errorf("an event of the upstream's stream is larger than max_response_bytes (%d bytes)", s.max)
			}
			s.buf = append(s.buf, value...)
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				ev.id, ev.hasID = string(value), true
			}
		case "retry":
			if ms, err := strconv.Atoi(string(value)); err == nil && ms >= 0 {
				ev.retry, ev.hasRetry = time.Duration(ms)*time.Millisecond, true
			}
		}
	}
}

// line reads one line without its end (LF, CRLF or CR-less), bounded by max.
func (s *sseReader) line() ([]byte, error) {
	if s.idle != nil {
		if b, _ := s.r.Peek(s.r.Buffered()); bytes.IndexByte(b, '\n') < 0 {
			s.idle()
		}
	}
	line, err := s.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// A long line: collect it, within the bound.
		long := append([]byte(nil), line...)
		for err == bufio.ErrBufferFull {
			if len(long) > s.max+16 {
				return nil, fmt.Errorf("a line of the upstream's stream is larger than max_response_bytes (%d bytes)", s.max)
			}
			line, err = s.r.ReadSlice('\n')
			long = append(long, line...)
		}
		line = long
	}
	if err != nil && !(err == io.EOF && len(line) > 0) {
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), nil
}
