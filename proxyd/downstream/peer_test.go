package downstream

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// scribbler is a ResponseWriter whose Write takes a frame from the pool
// and writes over it before keeping what it was given, as another call's
// answer would if a frame went back to the pool before it was written.
type scribbler struct{ *httptest.ResponseRecorder }

func (s scribbler) Write(p []byte) (int, error) {
	f := frames.get(len(p))
	*f = append(*f, bytes.Repeat([]byte{'#'}, len(p))...)
	frames.put(f)
	return s.ResponseRecorder.Write(p)
}

func (s scribbler) Flush() {}

// An answer's frame is reused only once it is written: finish, as JSON and
// as an SSE event, writes the answer it was given, and event the message. (The pool may drop what
// is put in it, so the check is repeated.)
func TestFinishWritesBeforeTheFrameIsReused(t *testing.T) {
	result := json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 70<<10) + `"}]}`)
	want := `{"jsonrpc":"2.0","id":7,"result":` + string(result) + `}`
	for _, sse := range []bool{false, true} {
		for range 20 {
			rec := scribbler{httptest.NewRecorder()}
			p := &httpPeer{w: rec, sse: sse}
			p.finish(json.RawMessage(`7`), result, nil)
			got := rec.Body.String()
			if sse {
				got = strings.TrimSuffix(strings.TrimPrefix(got, eventStart), eventEnd)
			}
			if got != want {
				t.Fatalf("sse %v: the answer written is not the answer (%d bytes, starts %.40q)", sse, len(got), got)
			}
			if !sse && rec.Code != http.StatusOK {
				t.Fatalf("status %d", rec.Code)
			}
		}
	}
	msg := notification("notifications/message", json.RawMessage(`{"level":"info","data":"`+strings.Repeat("y", 40<<10)+`"}`))
	for range 20 {
		rec := scribbler{httptest.NewRecorder()}
		p := &httpPeer{w: rec}
		if !p.event(msg, true) {
			t.Fatal("event refused")
		}
		if got := rec.Body.String(); got != eventStart+string(msg)+eventEnd {
			t.Fatalf("the event written is not the message (%d bytes, starts %.40q)", len(got), got)
		}
	}
}
