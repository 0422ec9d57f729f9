package proxyd

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// socketPost posts body to path on the daemon's socket and returns the
// status and body.
func (td *testDaemon) socketPost(t *testing.T, path, body string) (int, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", td.socket)
	}}}
	resp, err := hc.Post("http://proxyd.sock"+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Bad input to the control API is refused as such (400 naming the field),
// never turned into something else: an overflowing timeout is not an
// upstream timeout, a negative one is not ignored, trailing data is not
// dropped.
func TestControlAPIRefusesBadInput(t *testing.T) {
	td := startDaemon(t, "")
	cases := []struct {
		name, path, body, want string
	}{
		{"timeout overflows", "/v1/call", `{"tool":"x","timeout_ms":9223372036854775807}`, "timeout_ms"},
		{"timeout negative", "/v1/call", `{"tool":"x","timeout_ms":-5}`, "timeout_ms"},
		{"login timeout overflows", "/v1/login", `{"server":"x","timeout_ms":9223372036854775807}`, "timeout_ms"},
		{"login timeout negative", "/v1/login", `{"server":"x","timeout_ms":-1}`, "timeout_ms"},
		{"probe timeout overflows", "/v1/probe", `{"target":"http://127.0.0.1:1/mcp","timeout_ms":9223372036854775807}`, "timeout"},
		{"trailing data", "/v1/call", `{"tool":"x"} {"tool":"y"}`, "after the JSON"},
		{"trailing garbage", "/v1/probe", `{"target":"http://127.0.0.1:1/mcp"} x`, "after the JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := td.socketPost(t, c.path, c.body)
			if code != http.StatusBadRequest || !strings.Contains(body, c.want) {
				t.Fatalf("status %d: %s; want 400 naming %q", code, body, c.want)
			}
		})
	}
}
