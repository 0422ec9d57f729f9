package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// httpPeer is the client of one relayed request on the HTTP endpoint. It
// answers with a JSON body when nothing comes before the result, and
// otherwise turns the response into an SSE stream on which the upstream's
// notifications and requests for this call come first.
type httpPeer struct {
	w      http.ResponseWriter
	s      *Server
	server string   // the upstream the request went to
	sess   *session // legacy era; nil in the modern era
	modern bool
	caps   relay.Caps
	level  int // lowest log level passed on (see levels), -1 for all

	mu    sync.Mutex
	sse   bool
	ended bool
	held  bool // events written but not yet pushed to the client
	// closing: the connection closes after the answer (see closeAfter).
	closing bool
	// chunked: the response body is chunked (an HTTP/1.1 request).
	chunked bool

	// later: work for after the answer (see relay.Later).
	later relay.Later
	// shape: the form the client's era takes the result in, set by the
	// relay (relay.Shaper) and applied as the answer is framed.
	shape relay.Shape
	// shapeMembers lists the result's members (see relay.Shaper).
	shapeMembers *relay.Members
}

func (p *httpPeer) Modern() bool     { return p.modern }
func (p *httpPeer) Caps() relay.Caps { return p.caps }

// Owner is the legacy session the call came on ("" in the modern era).
func (p *httpPeer) Owner() string {
	if p.sess == nil {
		return ""
	}
	return p.sess.id
}

// Shape sets the shape the result is framed in (see relay.Shaper).
func (p *httpPeer) Shape(s relay.Shape, ms *relay.Members) {
	p.mu.Lock()
	p.shape, p.shapeMembers = s, ms
	p.mu.Unlock()
}

func (p *httpPeer) Notify(method string, params json.RawMessage) { p.notify(method, params, true) }

// NotifyHeld writes the notification without pushing it to the client:
// what comes next (the result, above all) goes out with it in one write
// instead of two (see relay.HeldNotifier).
func (p *httpPeer) NotifyHeld(method string, params json.RawMessage) { p.notify(method, params, false) }

// Flush pushes the notifications written and held.
func (p *httpPeer) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held && !p.ended {
		flush(p.w)
	}
	p.held = false
}

func (p *httpPeer) notify(method string, params json.RawMessage, push bool) {
	if method == relay.MethodMessage {
		if p.modern && p.level < 0 {
			return // a modern request that asked for no log messages gets none
		}
		if !relay.LogPasses(relay.StringMember(params, "level"), p.level) {
			return
		}
	}
	p.event(notification(method, params), push)
}

// notification encodes a JSON-RPC notification.
func notification(method string, params json.RawMessage) []byte {
	out := make([]byte, 0, 48+len(method)+len(params))
	out = append(out, `{"jsonrpc":"2.0","method":`...)
	out = relay.AppendString(out, method)
	if len(params) > 0 {
		out = append(out, `,"params":`...)
		out = append(out, params...)
	}
	return append(out, '}')
}

// askIDs numbers the requests proxyd puts to clients.
var askIDs atomic.Int64

// errStreamEnded: the client's response stream is over, so nothing more
// can be sent on it.
var errStreamEnded = errors.New("the client's response stream has ended")

// Ask puts the upstream's request to the client on this call's stream and
// waits for the client to post the response.
func (p *httpPeer) Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if p.sess == nil {
		return nil, relay.Refusal(method)
	}
	id := "mcpx-s-" + strconv.FormatInt(askIDs.Add(1), 10)
	ch := p.s.asks.wait(id, p.sess.id)
	defer p.s.asks.forget(id)
	msg := make([]byte, 0, 64+len(method)+len(params))
	msg = append(msg, `{"jsonrpc":"2.0","id":"`...)
	msg = append(msg, id...)
	msg = append(msg, `","method":`...)
	msg = relay.AppendString(msg, method)
	if len(params) > 0 {
		msg = append(msg, `,"params":`...)
		msg = append(msg, params...)
	}
	msg = append(msg, '}')
	if method == relay.MethodRoots && p.sess != nil {
		// A legacy upstream hears of later changes to these roots.
		p.sess.askedRoots(p.server)
	}
	if method == relay.MethodElicitation {
		// A URL elicitation's completion comes later, outside the call:
		// remember whose it is.
		if eid := relay.StringMember(params, "elicitationId"); eid != "" {
			p.s.urlElicitations.note(eid, p.sess.id)
		}
	}
	if !p.event(msg, true) {
		return nil, errStreamEnded
	}
	select {
	case a := <-ch:
		if a.err != nil {
			return nil, a.err
		}
		return a.result, nil
	case <-ctx.Done():
		// Tell the client the request is void.
		b, _ := json.Marshal(map[string]string{"requestId": id, "reason": "the upstream no longer waits for the answer"})
		p.event(notification(relay.MethodCancelled, b), true)
		return nil, ctx.Err()
	}
}

// event writes one message as an SSE event, switching the response to SSE
// first, and pushes it (and any held before it) to the client unless told
// to hold it; false once the response has been written.
func (p *httpPeer) event(msg []byte, push bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return false
	}
	p.startSSE()
	writeLastEvent(p.w, msg)
	if push {
		flush(p.w)
	}
	p.held = !push
	return true
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func (p *httpPeer) startSSE() {
	if p.sse {
		return
	}
	p.sse = true
	h := p.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	p.w.WriteHeader(http.StatusOK)
}

// writeLastEvent writes msg as an event, unflushed: it leaves with what
// is written after it (a held notification with the next event), or
// when the writer flushes (finish flushes the answer at once, so the
// call's bookkeeping does not delay it).
func writeLastEvent(w http.ResponseWriter, msg []byte) {
	f := frames.get(len(msg) + len(eventStart) + len(eventEnd))
	defer frames.put(f)
	*f = appendEvent(*f, msg)
	_, _ = w.Write(*f)
}

// An SSE event carrying one message.
const (
	eventStart = "event: message\ndata: "
	eventEnd   = "\n\n"
)

// appendEvent appends msg framed as one SSE event. JSON may hold line
// breaks between its tokens (an upstream's pretty-printed answer, a
// multi-line data field joined): each line goes on a data line of its
// own, which the client's SSE parser joins again, since a bare line
// would end the event, or be read as a field, in the middle of the
// message.
func appendEvent(dst, msg []byte) []byte {
	dst = append(dst, eventStart...)
	for {
		i := lineBreak(msg)
		if i < 0 {
			dst = append(dst, msg...)
			return append(dst, eventEnd...)
		}
		dst = append(dst, msg[:i]...)
		dst = append(dst, "\ndata: "...)
		if msg[i] == '\r' && i+1 < len(msg) && msg[i+1] == '\n' {
			i++ // CRLF is one break
		}
		msg = msg[i+1:]
	}
}

// lineBreak is the index of the first CR or LF in b, -1 without one.
func lineBreak(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		i = len(b)
	}
	if r := bytes.IndexByte(b[:i], '\r'); r >= 0 {
		return r
	}
	if i == len(b) {
		return -1
	}
	return i
}

// finish writes the response: the last event of an SSE stream, or a JSON
// body (with the modern era's HTTP status for an error).
func (p *httpPeer) finish(id json.RawMessage, result json.RawMessage, rpcErr *relay.RPCError) {
	// The answer is encoded (and framed) in one pooled buffer: a large
	// result is copied once, into memory that is not allocated anew.
	f := frames.get(len(result) + len(id) + len(eventStart) + len(eventEnd) + 64)
	defer frames.put(f)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended = true
	// The answer leaves now, not when the handler returns: the call's
	// bookkeeping runs after it (Call.Then).
	if p.sse {
		b := append(*f, eventStart...)
		b = appendResponse(b, id, result, rpcErr, p.shape, p.shapeMembers)
		if msg := b[len(eventStart):]; lineBreak(msg) >= 0 {
			// Rare: framed again, a data line for each of its lines.
			b = appendEvent(make([]byte, 0, len(b)+64), msg)
		} else {
			b = append(b, eventEnd...)
		}
		*f = b
		_, _ = p.w.Write(*f)
		if p.closing {
			flush(p.w)
			p.endStream()
			return
		}
		// After an SSE answer the handler returns at once (the
		// bookkeeping has a goroutine of its own): the last event leaves
		// with the chunked body's end, in one write.
		return
	}
	defer flush(p.w)
	*f = appendResponse(*f, id, result, rpcErr, p.shape, p.shapeMembers)
	status := http.StatusOK
	if rpcErr != nil && p.modern {
		status = httpStatusFor(rpcErr.Code)
	}
	h := p.w.Header()
	if p.closing {
		h["Connection"] = []string{"close"}
	}
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(*f))}
	p.w.WriteHeader(status)
	_, _ = p.w.Write(*f)
}

// streamed reports whether the answer went out as an SSE stream.
func (p *httpPeer) streamed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sse
}

// closeAfter has the connection closed after the answer, which leaves
// while the handler still runs: HTTP/1.1 would hold the client's next
// request on the connection until the handler returns.
func (p *httpPeer) closeAfter() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closing = true
}

// endStream ends an SSE answer whose handler goes on (see closeAfter):
// the connection is taken over, the end of the chunked body written and
// the connection closed, so a client reading the stream to its end is
// not held until the handler returns. Where the connection cannot be
// taken over, the stream ends with the handler.
func (p *httpPeer) endStream() {
	conn, buf, err := http.NewResponseController(p.w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	if p.chunked {
		_, _ = buf.WriteString("0\r\n\r\n")
		_ = buf.Flush()
	}
}

// close stops writes without a response (the request is gone).
func (p *httpPeer) close() {
	p.mu.Lock()
	p.ended = true
	p.mu.Unlock()
}

// appendResponse appends a JSON-RPC response to dst, its result in
// shape (ms lists its members, or is nil).
func appendResponse(dst []byte, id, result json.RawMessage, rpcErr *relay.RPCError, shape relay.Shape, ms *relay.Members) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	if rpcErr != nil {
		b, _ := json.Marshal(struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data,omitempty"`
		}{rpcErr.Code, rpcErr.Message, rpcErr.Data})
		dst = append(dst, `,"error":`...)
		dst = append(dst, b...)
	} else {
		dst = append(dst, `,"result":`...)
		dst = shape.Append(dst, result, ms)
	}
	return append(dst, '}')
}

// framePool holds the buffers messages are encoded or framed in just
// before they are written: a buffer is free again once Write returns (a
// ResponseWriter copies what it is given, or sends it, before it
// returns). Buffers over maxPooledFrame go to the collector instead, so
// one huge answer does not stay in the pool.
type framePool struct{ p sync.Pool }

const maxPooledFrame = 1 << 20

var frames framePool

// get returns an empty buffer with room for n bytes.
func (fp *framePool) get(n int) *[]byte {
	f, _ := fp.p.Get().(*[]byte)
	if f == nil {
		f = new([]byte)
	}
	*f = slices.Grow((*f)[:0], n)
	return f
}

func (fp *framePool) put(f *[]byte) {
	if cap(*f) <= maxPooledFrame {
		*f = (*f)[:0]
		fp.p.Put(f)
	}
}

// httpStatusFor maps a JSON-RPC error code to the modern era's HTTP status.
func httpStatusFor(code int) int {
	switch code {
	case relay.CodeMethodNotFound:
		return http.StatusNotFound
	case -32020, -32021, -32022, -32600, relay.CodeInvalidParams, -32700:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// answer is a client's response to a request proxyd put to it.
type answer struct {
	result json.RawMessage
	err    error
}

// asks routes the clients' responses to the requests proxyd put to them.
type asks struct {
	mu      sync.Mutex
	waiting map[string]askWaiter
}

type askWaiter struct {
	session string
	ch      chan answer
}

func (a *asks) wait(id, session string) <-chan answer {
	ch := make(chan answer, 1)
	a.mu.Lock()
	if a.waiting == nil {
		a.waiting = map[string]askWaiter{}
	}
	a.waiting[id] = askWaiter{session: session, ch: ch}
	a.mu.Unlock()
	return ch
}

func (a *asks) forget(id string) {
	a.mu.Lock()
	delete(a.waiting, id)
	a.mu.Unlock()
}

// deliver hands the client's response to the waiting request; false when
// nobody waits for id on this session.
func (a *asks) deliver(id, session string, ans answer) bool {
	a.mu.Lock()
	w, ok := a.waiting[id]
	if ok && w.session == session {
		delete(a.waiting, id)
	}
	a.mu.Unlock()
	if !ok || w.session != session {
		return false
	}
	w.ch <- ans
	return true
}

// maxURLElicitations bounds the URL elicitations remembered for their
// completion notices.
const maxURLElicitations = 1024

// urlElicitations remembers which session each URL-mode elicitation went
// to, so the upstream's notifications/elicitation/complete reaches it.
type urlElicitations struct {
	mu    sync.Mutex
	owner map[string]string
	order []string
}

func (u *urlElicitations) note(id, session string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.owner == nil {
		u.owner = map[string]string{}
	}
	if _, ok := u.owner[id]; !ok {
		u.order = append(u.order, id)
	}
	u.owner[id] = session
	for len(u.order) > maxURLElicitations {
		delete(u.owner, u.order[0])
		u.order = u.order[1:]
	}
}

// take returns and forgets the session of elicitation id.
func (u *urlElicitations) take(id string) (string, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	s, ok := u.owner[id]
	delete(u.owner, id)
	return s, ok
}
