package downstream

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
