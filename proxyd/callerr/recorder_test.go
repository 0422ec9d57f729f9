package callerr

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

func TestRecorderFacts(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		session     bool
		want        Facts
	}{
		{"json result", 200, "application/json", `{"jsonrpc":"2.0","id":1,"result":{}}`, false,
			Facts{HTTPStatus: 200, ContentType: "application/json"}},
		{"json error with charset", 200, "application/json; charset=utf-8", `{"jsonrpc":"2.0","id":1,"error":{"code":-32099,"message":"x"}}`, false,
			Facts{HTTPStatus: 200, ContentType: "application/json", JSONRPCCode: -32099, HasJSONRPCCode: true}},
		{"json-rpc error under 502", 502, "application/json", `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"x"}}`, false,
			Facts{HTTPStatus: 502, ContentType: "application/json", JSONRPCCode: -32603, HasJSONRPCCode: true}},
		{"malformed json", 200, "application/json", `{"jsonrpc":"2.0","id":`, false,
			Facts{HTTPStatus: 200, ContentType: "application/json", BodyComplete: true}},
		{"html by content type", 502, "text/html", `Bad gateway`, false,
			Facts{HTTPStatus: 502, ContentType: "text/html", HTMLBody: true}},
		{"html sniffed", 503, "text/plain", "\n  <!DOCTYPE HTML><html>down</html>", false,
			Facts{HTTPStatus: 503, ContentType: "text/plain", HTMLBody: true}},
		{"plain 500", 500, "text/plain", `oops`, false,
			Facts{HTTPStatus: 500, ContentType: "text/plain"}},
		{"404 with session", 404, "", ``, true,
			Facts{HTTPStatus: 404, SessionLost: true}},
		{"404 without session", 404, "", ``, false,
			Facts{HTTPStatus: 404}},
		{"202 accepted", 202, "", ``, false,
			Facts{HTTPStatus: 202}},
		{"sse error event", 200, "text/event-stream", "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32001,\"message\":\"m\"}}\r\n\r\n", false,
			Facts{HTTPStatus: 200, ContentType: "text/event-stream", JSONRPCCode: -32001, HasJSONRPCCode: true}},
		{"sse result", 200, "text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"error\":\"not an rpc error\"}}\n\n", false,
			Facts{HTTPStatus: 200, ContentType: "text/event-stream"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.contentType != "" {
					w.Header().Set("Content-Type", tt.contentType)
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			ctx, rec := WithRecorder(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
			if tt.session {
				req.Header.Set("Mcp-Session-Id", "abc")
			}
			resp, err := (&http.Client{Transport: NewTransport(nil)}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(iotest.OneByteReader(resp.Body)) // SSE lines split across reads
			resp.Body.Close()
			if string(b) != tt.body {
				t.Errorf("body changed: %q", b)
			}
			want := tt.want
			want.Dispatched, want.Requests = true, 1
			// Every non-empty body but a stream is read ahead whole.
			want.BodyComplete = tt.body != "" && tt.contentType != "text/event-stream"
			if got := rec.Facts(); got != want {
				t.Errorf("Facts = %+v\nwant    %+v", got, want)
			}
		})
	}
}

// Each request starts fresh response facts; session loss and the request
// count accumulate over the call.
func TestRecorderLastResponseWins(t *testing.T) {
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		if n == 1 {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}))
	defer srv.Close()
	ctx, rec := WithRecorder(context.Background())
	hc := &http.Client{Transport: NewTransport(nil)}
	for range 2 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
		req.Header.Set("Mcp-Session-Id", "abc")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	f := rec.Facts()
	if f.HTTPStatus != 200 || !f.SessionLost || f.Requests != 2 {
		t.Errorf("facts %+v", f)
	}
}

func TestNilRecorder(t *testing.T) {
	var r *Recorder
	r.MarkDispatched()
	if f := r.Facts(); f.Dispatched {
		t.Errorf("nil recorder facts %+v", f)
	}
	if RecorderFrom(context.Background()) != nil {
		t.Error("recorder from a bare context")
	}
}

// ReadBody reads a body whole, whether PeekBody read all of it (handed
// out without a copy), part of it (read on after the head), or broke off;
// and a body read from since, or never peeked, as io.ReadAll does.
func TestReadBody(t *testing.T) {
	long := strings.Repeat("0123456789", 1000)
	for _, tt := range []struct {
		name, body string
		peek       bool
		declared   bool // Content-Length given
		readFirst  int
		broken     bool
		want       string
		shared     bool // ReadBody's bytes are in the peek's buffer (no copy)
	}{
		{name: "peeked whole", body: `{"result":{}}`, peek: true, want: `{"result":{}}`, shared: true},
		{name: "peeked whole, length declared", body: `{"result":{}}`, peek: true, declared: true, want: `{"result":{}}`, shared: true},
		{name: "peeked empty", body: ``, peek: true, want: ``},
		{name: "longer than the peek", body: long, peek: true, want: long},
		{name: "longer than the peek, length declared", body: long, peek: true, declared: true, want: long, shared: true},
		{name: "broken after the peek", body: long, peek: true, broken: true, want: long},
		{name: "broken within the peek", body: `{"res`, peek: true, broken: true, want: `{"res`},
		{name: "read from since", body: long, peek: true, readFirst: 10, want: long[10:]},
		{name: "never peeked", body: long, want: long},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var r io.Reader = strings.NewReader(tt.body)
			if tt.broken {
				r = io.MultiReader(r, iotest.ErrReader(io.ErrUnexpectedEOF))
			}
			resp := &http.Response{Body: io.NopCloser(r), ContentLength: -1}
			if tt.declared {
				resp.ContentLength = int64(len(tt.body))
			}
			var head []byte
			if tt.peek {
				var whole bool
				head, whole, _ = PeekBody(resp, 64)
				if whole != (len(tt.body) <= 64 && !tt.broken) {
					t.Errorf("PeekBody: whole %v for a body of %d bytes", whole, len(tt.body))
				}
				if want := tt.body[:min(len(tt.body), 64+1)]; string(head) != want {
					t.Errorf("PeekBody's head = %.40q..., want %.40q...", head, want)
				}
			}
			if tt.readFirst > 0 {
				io.ReadFull(resp.Body, make([]byte, tt.readFirst))
			}
			b, err := ReadBody(resp.Body)
			if string(b) != tt.want {
				t.Fatalf("ReadBody = %d bytes %.40q..., want %d bytes", len(b), b, len(tt.want))
			}
			if (err != nil) != tt.broken {
				t.Fatalf("ReadBody error %v, broken %v", err, tt.broken)
			}
			// A body peeked whole is handed out as it is; a declared
			// length is read on in the peek's buffer, sized for it.
			if tt.shared && (len(head) == len(b) && &b[0] != &head[0] || cap(b) != len(b) && cap(b) != len(b)+1) {
				t.Error("ReadBody copied the peeked bytes")
			}
			if n, err := resp.Body.Read(make([]byte, 1)); n != 0 || err != io.EOF && !tt.broken {
				t.Errorf("a Read after ReadBody: %d, %v", n, err)
			}
		})
	}
}

func TestHasErrorMember(t *testing.T) {
	tests := []struct {
		body string
		want bool
	}{
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32099,"message":"x"}}`, true},
		{` { "id" : 1 , "error" : null } `, true},
		{`{"jsonrpc":"2.0","id":1,"Error":{"code":-32099}}`, true}, // encoding/json reads it so
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"\"error\": none"}]}}`, false},
		{`{"jsonrpc":"2.0","id":1,"result":{"error":{"code":1}}}`, false},
		{`["error"]`, false},
		{`"error"`, false},
		{``, false},
	}
	for _, tt := range tests {
		if got := hasErrorMember([]byte(tt.body)); got != tt.want {
			t.Errorf("hasErrorMember(%s) = %v, want %v", tt.body, got, tt.want)
		}
	}
}

// A body of unknown length longer than the peek (a JSON answer from a
// server that streams it chunked, as Go's HTTP server does) is joined
// once, with the peek's chunks and the rest together; joining the peek's
// head first, then head and rest, allocated and copied the head twice.
func TestReadBodyJoinsOnce(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 100<<10/16) // 100 KiB
	read := func() {
		resp := &http.Response{Body: io.NopCloser(bytes.NewReader(body)), ContentLength: -1}
		if _, whole, _ := PeekBody(resp, peekLimit); whole {
			t.Fatal("a 100 KiB body peeked whole")
		}
		if b, err := ReadBody(resp.Body); err != nil || !bytes.Equal(b, body) {
			t.Fatalf("ReadBody = %d bytes, %v", len(b), err)
		}
	}
	read() // the chunks' pool filled
	const runs = 100
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		read()
	}
	runtime.ReadMemStats(&after)
	perRead := float64(after.TotalAlloc-before.TotalAlloc) / runs
	// One copy, and under the race detector the chunks its pool drops (a
	// quarter of those put back, about five a read: 40 KiB on average).
	limit := 1.25 * float64(len(body))
	if raceDetector {
		limit += 64 << 10
	}
	if perRead > limit {
		t.Errorf("%.0f bytes allocated per read of a %d-byte body, want at most %.0f (one copy)", perRead, len(body), limit)
	}
}
