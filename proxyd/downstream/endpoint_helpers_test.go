package downstream

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// testToken is the bearer of the endpoints the tests start.
const testToken = "mcpx_test_token_0123456789abcdef0123456789"

// startEndpoint serves backend's lists on an endpoint on loopback (bearer
// testToken), stopped when the test ends.
func startEndpoint(t *testing.T, backend Backend) (*Server, *httptest.Server) {
	t.Helper()
	s := New(backend, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.Sync()
	srv := httptest.NewServer(s.Handler(testToken, ""))
	t.Cleanup(srv.Close)
	return s, srv
}

// roundTrip sends req and returns its status and its body, read whole.
func roundTrip(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// endpointRequest is a POST of body to the endpoint at url (bearer
// testToken) in protocol version, on legacy session sid ("": none).
func endpointRequest(t *testing.T, url, version, sid, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", version)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	return req
}

// legacyRequest is a legacy-era (2025-11-25) request on session sid.
func legacyRequest(t *testing.T, url, sid, body string) *http.Request {
	t.Helper()
	return endpointRequest(t, url, "2025-11-25", sid, body)
}

// legacySessionID opens a legacy session (initialize, then
// notifications/initialized) and returns its id.
func legacySessionID(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.DefaultClient.Do(legacyRequest(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize gave no session (status %d)", resp.StatusCode)
	}
	if code, body := roundTrip(t, legacyRequest(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)); code != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", code, body)
	}
	return sid
}
