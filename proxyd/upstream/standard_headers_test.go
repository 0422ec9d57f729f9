package upstream

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// post sends body through standardHeaders to srv with the headers given.
func post(t *testing.T, srv *httptest.Server, body string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := standardHeaders{next: http.DefaultTransport}.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestStandardHeaders(t *testing.T) {
	var mu sync.Mutex
	var methods []string
	rejectFirst := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(b, &msg)
		mu.Lock()
		methods = append(methods, r.Header.Get("Mcp-Method"))
		reject := rejectFirst && msg.Method == "tools/list"
		rejectFirst = rejectFirst && !reject
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case reject:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"error":{"code":-32022,"message":"no","data":{"supported":["2026-07-28"]}}}`))
		case msg.Method == "server/discover":
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"result":{}}`))
		default:
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"result":{"tools":[]}}`))
		}
	}))
	defer srv.Close()

	// The handshake gets Mcp-Method like every other request.
	post(t, srv, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, nil)
	post(t, srv, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	// A refusal of a version the server lists is answered by sending again.
	resp, body := post(t, srv, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, http.Header{"Mcp-Protocol-Version": {"2026-07-28"}})
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"tools"`)) {
		t.Errorf("tools/list after a -32022 listing its version = %d %s, want the retry's result", resp.StatusCode, body)
	}
	// An empty discover result is no modern server's.
	_, body = post(t, srv, `{"jsonrpc":"2.0","id":3,"method":"server/discover"}`, nil)
	var e struct {
		Error *struct{ Code int } `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == nil || e.Error.Code != mcp.METHOD_NOT_FOUND {
		t.Errorf("discover without supportedVersions = %s, want method not found", body)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"initialize", "notifications/initialized", "tools/list", "tools/list", "server/discover"}
	if strings.Join(methods, ",") != strings.Join(want, ",") {
		t.Errorf("Mcp-Method headers seen = %q, want %q", methods, want)
	}
}
