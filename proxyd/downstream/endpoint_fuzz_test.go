package downstream

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

var (
	fuzzOnce    sync.Once
	fuzzHandler http.Handler
)

// The endpoint (its guard, the relay's JSON-RPC peek and the library
// behind it) on any body, content type and protocol version: no panic,
// and a 200 JSON answer is JSON.
func FuzzEndpointBody(f *testing.F) {
	for _, s := range []struct{ body, ctype, version string }{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}`, "application/json", ""},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"x"},"_meta":{"progressToken":1}}}`, "application/json", "2025-11-25"},
		{`{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, "application/json; charset=utf-8", "2026-07-28"},
		{` [{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "application/json", ""},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, "application/json", "2025-06-18"},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, "application/json", ""},
		{`{"id":`, "application/json", ""},
		{"", "text/plain", "bogus"},
	} {
		f.Add([]byte(s.body), s.ctype, s.version)
	}
	f.Fuzz(func(t *testing.T, body []byte, ctype, version string) {
		fuzzOnce.Do(func() {
			s := New(hintBackend{}, "fuzz", slog.New(slog.NewTextHandler(io.Discard, nil)))
			s.Sync()
			fuzzHandler = s.Handler("", "")
		})
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Accept", "application/json, text/event-stream")
		if version != "" {
			req.Header.Set("Mcp-Protocol-Version", version)
		}
		rec := httptest.NewRecorder()
		fuzzHandler.ServeHTTP(rec, req)
		if rec.Code == http.StatusOK && rec.Header().Get("Content-Type") == "application/json" && rec.Body.Len() > 0 &&
			!json.Valid(rec.Body.Bytes()) {
			t.Fatalf("200 with a JSON content type and a body that is not JSON: %q", rec.Body.Bytes())
		}
	})
}
