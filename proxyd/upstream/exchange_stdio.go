package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// stdioLink is proxyd's end of a stdio child's pipes. It reads every line
// the child writes: the response to a request proxyd wrote itself (a
// relayed one) goes to that request, the child's own requests and
// notifications go to proxyd's handlers as they came (the MCP library
// decodes them into maps, which re-encode with their members sorted and
// large numbers cut to a float's digits), and everything else (the
// handshake's and the lists' responses) to the MCP library's transport,
// which writes to the child's stdin through the link, under its lock.
type stdioLink struct {
	c    *Conn
	conn uint64 // the connection the child serves (see losses)
	max  int64  // the longest line read, max_response_bytes

	wmu   sync.Mutex // one whole line at a time on the child's stdin
	stdin io.WriteCloser

	lib *io.PipeWriter // what the library's transport reads

	answers // the relayed requests; ended with the child's stdout
}

// stdioLineBuffer is the reader's buffer; a longer line is put together
// from its pieces.
const stdioLineBuffer = 64 << 10

func newStdioLink(c *Conn, conn uint64, stdin io.WriteCloser) (*stdioLink, io.Reader) {
	r, w := io.Pipe()
	return &stdioLink{c: c, conn: conn, max: c.cfg.ResponseLimit(), stdin: stdin, lib: w, answers: newAnswers()}, r
}

// libraryStdin is the child's stdin as the library writes it: each of its
// writes is one whole line.
func (l *stdioLink) libraryStdin() io.WriteCloser { return linkStdin{l} }

type linkStdin struct{ l *stdioLink }

func (s linkStdin) Write(p []byte) (int, error) { return s.l.write(p) }
func (s linkStdin) Close() error                { return s.l.stdin.Close() }

func (l *stdioLink) write(p []byte) (int, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return l.stdin.Write(p)
}

// read reads the child's stdout until it ends (run on its own goroutine).
func (l *stdioLink) read(out io.Reader) {
	br := bufio.NewReaderSize(out, stdioLineBuffer)
	var long []byte // a line longer than the buffer, so far (nil: none)
	for {
		frag, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if int64(len(long)+len(frag)) > l.max {
				l.breach()
				return
			}
			long = append(long, frag...)
			continue
		}
		if err != nil {
			// A last line without its newline is no message (the library
			// drops it too).
			l.end(transport.ErrTransportClosed)
			return
		}
		if int64(len(long)+len(frag)) > l.max+1 {
			l.breach()
			return
		}
		// The line gets bytes of its own, which the buffer will not
		// overwrite: what goes on keeps slices of it.
		l.line(append(long, frag...))
		long = nil
	}
}

// line takes one line of the child's stdout, newline included.
func (l *stdioLink) line(b []byte) {
	ch := &l.c.child
	live := ch.answered.Load()
	if !live {
		ch.note(b)
	}
	m, err := relay.ParseMessage(bytes.TrimRight(b, "\r\n"))
	switch {
	case err != nil:
		l.toLibrary(b) // not a message: the library skips it, as ever
	case m.Method == "":
		if !l.deliver(m) {
			l.toLibrary(b)
		}
	case !live:
		// Before the handshake's answer, the library's: a request is
		// answered by its client, a notification dropped, as they were.
		l.toLibrary(b)
	case len(m.ID) == 0:
		l.c.notification(m.Method, m.Params)
	default:
		l.c.serveRequest(m, nil, func(b []byte) { _, _ = l.write(append(b, '\n')) })
	}
}

// toLibrary passes a line to the library's transport; once the transport
// is closed (childTransport.Close closes the pipe), lines are dropped.
func (l *stdioLink) toLibrary(b []byte) {
	_, _ = l.lib.Write(b)
}

// breach ends the link for a line past max_response_bytes: the calls
// waiting fail with the limit, and a connection that was ready is dropped
// and connected again after a backoff, as for a standing stream's breach.
func (l *stdioLink) breach() {
	e := &callerr.LimitError{Limit: "max_response_bytes",
		Reason: fmt.Sprintf("a stdout line longer than max_response_bytes (%d bytes); proxyd ended the server", l.max)}
	l.c.child.mu.Lock()
	l.c.child.breach = e
	l.c.child.mu.Unlock()
	l.end(e)
	if l.c.child.answered.Load() {
		l.c.streamBroke(l.conn, e)
	}
}

// end fails the requests waiting with err and ends the library's stdout.
func (l *stdioLink) end(err error) {
	l.answers.end(err)
	_ = l.lib.Close()
}

// sendStdio writes x to the child itself and waits for its response: the
// params (parts, edited or not) are copied once, into the line, and the
// result comes as the child wrote it.
func (c *Conn) sendStdio(ctx context.Context, cl *client.Client, l *stdioLink, w wire, x *exchange, params [][]byte, meta json.RawMessage) (json.RawMessage, error) {
	key := relay.IDKey(relay.AppendString(nil, x.id))
	call, err := l.expect(key, callerr.RecorderFrom(ctx))
	if err != nil {
		return nil, transport.NewError(err)
	}
	line := bytes.Join(append(envelope(x.id, x.ex.Method, params, meta), []byte("\n")), nil)
	if _, err := l.write(line); err != nil {
		l.take(key)
		return nil, transport.NewError(fmt.Errorf("failed to write request: %w", err))
	}
	return c.await(ctx, cl, nil, w, &l.answers, x, key, call)
}
