package callerr

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/mcpx-dev/mcpx/internal/readall"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// Facts are what the HTTP transport saw for one call. The MCP library
// flattens non-2xx responses and drops non-standard JSON-RPC codes, so
// classification relies on these instead of error text.
type Facts struct {
	// Dispatched is true once the call was handed to the upstream (an HTTP
	// request was sent, or a stdio message written).
	Dispatched bool
	// HTTPStatus, ContentType, HTMLBody, JSONRPCCode and HasJSONRPCCode
	// describe the last HTTP response of the call; 0/empty without one.
	HTTPStatus     int
	ContentType    string
	HTMLBody       bool
	JSONRPCCode    int
	HasJSONRPCCode bool
	// Requests counts HTTP requests sent for the call.
	Requests int
	// BodyComplete is true when the transport read the whole (JSON or
	// error) body without a read error, so a decode failure afterwards
	// means a malformed body rather than a dropped connection.
	BodyComplete bool
	// SessionLost is true when a request carrying a session id got a 404.
	SessionLost bool
	// InsufficientScope is true when a 403 carried a Bearer challenge with
	// error="insufficient_scope": the fix is a sign-in with more scope.
	InsufficientScope bool
	// TransportErr is the last error the HTTP transport returned (no response).
	TransportErr error
	// Limit is set when a response broke one of proxyd's bounds and was cut off.
	Limit *LimitError
	// Asking counts the upstream's requests for input (elicitation,
	// sampling) the call's client is answering now; AskTimedOut: the
	// call's deadline passed while it was answering one.
	Asking      int
	AskTimedOut bool
}

// Recorder collects Facts for one call; it is safe for concurrent use.
type Recorder struct {
	mu sync.Mutex
	f  Facts
}

// WithRecorder returns a context carrying a fresh Recorder for one call,
// which the relay tells of the requests for input the call's client
// answers: the context holds it as the call's relay.InputWatcher (one
// value, not two, on every call).
func WithRecorder(ctx context.Context) (context.Context, *Recorder) {
	r := &Recorder{}
	return relay.WithInputWatcher(ctx, r), r
}

// InputAsked records that the call's client is being asked for input.
func (r *Recorder) InputAsked() {
	r.mu.Lock()
	r.f.Asking++
	r.mu.Unlock()
}

// InputAnswered records that the client's answer is in, or that the
// call's deadline passed first (timedOut).
func (r *Recorder) InputAnswered(timedOut bool) {
	r.mu.Lock()
	r.f.Asking--
	r.f.AskTimedOut = r.f.AskTimedOut || timedOut
	r.mu.Unlock()
}

// RecorderFrom returns the context's Recorder, or nil.
func RecorderFrom(ctx context.Context) *Recorder {
	r, _ := relay.InputWatcherFrom(ctx).(*Recorder)
	return r
}

// Facts returns a snapshot of what was recorded so far.
func (r *Recorder) Facts() Facts {
	if r == nil {
		return Facts{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.f
}

// MarkDispatched records that the call left the proxy (used by non-HTTP
// transports; the HTTP transport marks it itself).
func (r *Recorder) MarkDispatched() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.f.Dispatched = true
	r.mu.Unlock()
}

// RecordLimit records that a response of the call broke a bound.
func (r *Recorder) RecordLimit(e *LimitError) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.f.Limit = e
	r.mu.Unlock()
}

// RecordJSONRPCError records a JSON-RPC error code that a reader of an
// SSE answer found in it after taking the stream with StreamBody.
func (r *Recorder) RecordJSONRPCError(code int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.f.JSONRPCCode, r.f.HasJSONRPCCode = code, true
	r.mu.Unlock()
}

// peekLimit bounds how much of a JSON or error body is inspected; JSON-RPC
// error responses and gateway error pages fit well within it.
const peekLimit = 64 << 10

// sessionHeader is the legacy-era session header.
const sessionHeader = "Mcp-Session-Id"

type recordingTransport struct{ next http.RoundTripper }

// NewTransport wraps next (nil means http.DefaultTransport) so that requests
// whose context carries a Recorder have their dispatch, status, content type
// and JSON-RPC error code recorded. It must be the outermost layer so it sees
// what the MCP library sees. Requests without a Recorder pass through
// untouched; streamed (SSE) bodies are observed as they are read, never
// buffered.
func NewTransport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &recordingTransport{next: next}
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// wrapped transport.
func (t *recordingTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := RecorderFrom(req.Context())
	if rec == nil {
		return t.next.RoundTrip(req)
	}
	withSession := req.Header.Get(sessionHeader) != ""
	rec.mu.Lock()
	rec.f.Dispatched = true
	rec.f.Requests++
	// Response facts describe the latest request only.
	rec.f.HTTPStatus, rec.f.ContentType, rec.f.HTMLBody, rec.f.BodyComplete = 0, "", false, false
	rec.f.JSONRPCCode, rec.f.HasJSONRPCCode, rec.f.TransportErr = 0, false, nil
	rec.mu.Unlock()

	resp, err := t.next.RoundTrip(req)
	if err != nil {
		rec.mu.Lock()
		rec.f.TransportErr = err
		rec.mu.Unlock()
		return resp, err
	}
	mediaType := mediaType(resp.Header.Get("Content-Type"))
	rec.mu.Lock()
	rec.f.HTTPStatus = resp.StatusCode
	rec.f.ContentType = mediaType
	if resp.StatusCode == http.StatusNotFound && withSession {
		rec.f.SessionLost = true
	}
	if resp.StatusCode == http.StatusForbidden {
		for _, v := range resp.Header.Values("WWW-Authenticate") {
			if strings.Contains(v, "insufficient_scope") {
				rec.f.InsufficientScope = true
			}
		}
	}
	rec.f.HTMLBody = mediaType == "text/html"
	rec.mu.Unlock()
	if resp.Body == nil || resp.Body == http.NoBody {
		return resp, nil
	}
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	switch {
	case mediaType == "text/event-stream":
		resp.Body = &sseObserver{rc: resp.Body, rec: rec}
	case mediaType == "application/json" || !ok:
		inspectBody(resp, rec, mediaType)
	}
	return resp, nil
}

// mediaType is the lower-cased type/subtype of a Content-Type value.
func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

// inspectBody reads up to peekLimit+1 bytes and puts them back in front of
// the rest of the body, so the reader sees the body unchanged. A body larger
// than the limit is not parsed; a body without an "error" member is not
// decoded either, which keeps large results cheap.
func inspectBody(resp *http.Response, rec *Recorder, mediaType string) {
	head, whole, err := PeekBody(resp, peekLimit)
	trimmed := bytes.TrimSpace(head)
	html := looksHTML(trimmed)
	code, hasCode := 0, false
	if whole && !html && hasErrorMember(trimmed) {
		code, hasCode = jsonRPCErrorCode(trimmed)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if err != nil {
		rec.f.TransportErr = err
	}
	rec.f.BodyComplete = whole
	rec.f.HTMLBody = rec.f.HTMLBody || html
	rec.f.JSONRPCCode, rec.f.HasJSONRPCCode = code, hasCode
}

// headLook is how much of a body longer than a peek PeekBody hands out:
// enough to tell what kind of body it is.
const headLook = 512

// PeekBody reads up to limit+1 bytes of resp's body and puts them back in
// front of the rest, so later readers see the body unchanged. whole
// reports that head is the entire body; else head is a copy of its first
// bytes (up to 512, or what arrived before it broke off). err is the read
// error, if the body broke off (a reset mid-response): readers then get
// the same error after the bytes that did arrive.
func PeekBody(resp *http.Response, limit int64) (head []byte, whole bool, err error) {
	orig := resp.Body
	// A declared length sizes the buffer for the whole body, so that
	// ReadBody reads the rest into it without a copy (the response limit,
	// below this layer, has refused lengths over it); a body of unknown
	// length is read in chunks, which ReadBody joins once with the rest.
	var buf []byte
	if cl := resp.ContentLength; cl >= 0 {
		buf = make([]byte, 0, cl+1)
	}
	rb := &replayBody{body: readall.NewBody(buf), tail: orig, c: orig}
	body := &rb.body
	_, err = body.ReadFrom(io.LimitReader(orig, limit+1))
	switch {
	case err != nil:
		head = body.Bytes()
		rb.tail = errReader{err}
	case int64(body.Len()) <= limit:
		head, whole = body.Bytes(), true
		rb.whole = head
	default:
		head = body.Head(headLook)
	}
	resp.Body = rb
	return head, whole, err
}

// replayBody is a body read ahead by PeekBody.
type replayBody struct {
	// r replays what was read ahead, then tail, made at the first Read (a
	// body read with ReadBody, the relay's every JSON answer, never needs
	// it).
	r io.Reader
	c io.Closer
	// body and tail are the bytes read ahead and what follows them, until
	// the first Read.
	body readall.Body
	tail io.Reader
	// whole is the entire body when PeekBody read all of it, until the
	// first Read.
	whole []byte
}

func (b *replayBody) Read(p []byte) (int, error) {
	if b.r == nil {
		b.r = io.MultiReader(bytes.NewReader(b.body.Bytes()), b.tail)
		b.body, b.tail, b.whole = readall.Body{}, nil, nil
	}
	return b.r.Read(p)
}

func (b *replayBody) Close() error { return b.c.Close() }

// ReadBody reads all of body. A body PeekBody read ahead, and not read
// since, is not copied again: the whole of it is handed out as it is, and
// a longer one is read on after its head, in the head's buffer when
// PeekBody sized it for the whole body (a declared length), else in
// chunks joined once with the head's.
func ReadBody(body io.Reader) ([]byte, error) {
	rb, ok := body.(*replayBody)
	if !ok || rb.tail == nil {
		return io.ReadAll(body)
	}
	b := rb.whole
	var err error
	if b == nil {
		_, err = rb.body.ReadFrom(rb.tail)
		b = rb.body.Bytes()
	}
	rb.body, rb.tail, rb.whole = readall.Body{}, nil, nil
	rb.r = eofReader{}
	return b, err
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func looksHTML(b []byte) bool {
	if len(b) == 0 || b[0] != '<' {
		return false
	}
	head := bytes.ToLower(b[:min(len(b), 64)])
	return bytes.HasPrefix(head, []byte("<!doctype html")) || bytes.HasPrefix(head, []byte("<html")) ||
		bytes.HasPrefix(head, []byte("<head")) || bytes.HasPrefix(head, []byte("<body")) ||
		bytes.HasPrefix(head, []byte("<!--")) || bytes.HasPrefix(head, []byte("<title")) ||
		bytes.HasPrefix(head, []byte("<center"))
}

// hasErrorMember reports whether the JSON object b has a member "error"
// (in any case, as encoding/json reads keys). Only b's own members are
// read, which is a skip over a large result's content, not a search of
// all its text.
func hasErrorMember(b []byte) bool {
	found := false
	relay.EachValue(b, func(key, _ []byte) {
		found = found || bytes.EqualFold(key, []byte("error"))
	})
	return found
}

// jsonRPCErrorCode returns the error code of a JSON-RPC error response.
func jsonRPCErrorCode(b []byte) (int, bool) {
	var msg struct {
		JSONRPC string `json:"jsonrpc"`
		Error   *struct {
			Code *int `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &msg) != nil || msg.Error == nil || msg.Error.Code == nil {
		return 0, false
	}
	return *msg.Error.Code, true
}

// sseObserver passes an event stream through unchanged while scanning its
// data lines for a JSON-RPC error, keeping at most one line's worth
// (bounded) of state.
type sseObserver struct {
	rc   io.ReadCloser
	rec  *Recorder
	line []byte
	skip bool // current line exceeded the bound; ignore until newline
}

// StreamBody is an SSE answer's body without the transport's scan, for a
// caller that parses every event itself: it reports the answer's
// JSON-RPC error with Recorder.RecordJSONRPCError, so each event is read
// once. Any other body is returned as it is.
func StreamBody(body io.ReadCloser) io.ReadCloser {
	if o, ok := body.(*sseObserver); ok {
		return o.rc
	}
	return body
}

func (o *sseObserver) Read(p []byte) (int, error) {
	n, err := o.rc.Read(p)
	o.scan(p[:n])
	return n, err
}

func (o *sseObserver) Close() error { return o.rc.Close() }

func (o *sseObserver) scan(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		chunk := b
		if i >= 0 {
			chunk = b[:i]
		}
		if !o.skip {
			if len(o.line)+len(chunk) > peekLimit {
				o.skip, o.line = true, o.line[:0]
			} else {
				o.line = append(o.line, chunk...)
			}
		}
		if i < 0 {
			return
		}
		if !o.skip {
			o.observeLine(bytes.TrimRight(o.line, "\r"))
		}
		o.line, o.skip = o.line[:0], false
		b = b[i+1:]
	}
}

func (o *sseObserver) observeLine(line []byte) {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return
	}
	data = bytes.TrimSpace(data)
	if !hasErrorMember(data) {
		return
	}
	if code, ok := jsonRPCErrorCode(data); ok {
		o.rec.mu.Lock()
		o.rec.f.JSONRPCCode, o.rec.f.HasJSONRPCCode = code, true
		o.rec.mu.Unlock()
	}
}
