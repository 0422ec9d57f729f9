package proxyd

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
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

// The metrics listener is bounded like the other servers: a keep-alive
// connection is closed after limits.idle_timeout, slow headers after
// limits.read_header_timeout.
func TestMetricsListenerBounded(t *testing.T) {
	td := startDaemon(t, "listen: 127.0.0.1:0\nmetrics_listen: 127.0.0.1:0\nlimits: {idle_timeout: 200ms, read_header_timeout: 200ms}\n")
	st, err := td.client.Status(context.Background())
	if err != nil || st.MetricsListen == "" {
		t.Fatalf("status: %+v, %v", st, err)
	}
	for _, req := range []string{
		"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", // answered, then idle
		"GET /metrics HTTP/1.1\r\nHost: x\r\n",     // headers never finished
	} {
		c, err := net.Dial("tcp", st.MetricsListen)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.Copy(io.Discard, c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("%q: the metrics listener kept the connection open for 10s", req)
		}
	}
}
