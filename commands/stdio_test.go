package commands

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The bridge's own error answers are JSON whatever their message holds:
// a proxyd answer or a client's line may carry control characters or
// bytes that are not UTF-8.
func TestErrorLineIsJSON(t *testing.T) {
	for _, tt := range []struct {
		id, msg string
		want    string // the message read back, when not msg
	}{
		{"", "parse error: invalid character 'x' looking for beginning of value", ""},
		{"7", "proxyd answered HTTP 502: bad\x01gateway", ""},
		{`"a"`, "bell\a and tab\v", ""},
		{"", "not utf-8: \xff\xfe", "not utf-8: \uFFFD\uFFFD"},
		{"", `quote " and backslash \`, ""},
	} {
		line := errorLine(json.RawMessage(tt.id), -32603, tt.msg)
		var m struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Errorf("%q: %s is not JSON: %v", tt.msg, line, err)
			continue
		}
		wantID := tt.id
		if wantID == "" {
			wantID = "null"
		}
		want := tt.want
		if want == "" {
			want = tt.msg
		}
		if m.JSONRPC != "2.0" || string(m.ID) != wantID || m.Error.Code != -32603 || m.Error.Message != want {
			t.Errorf("%q: %s", tt.msg, line)
		}
	}
}

// The bridge sends a message again only when proxyd certainly did not
// take it: gone, refused while stopping, or the session unknown. An
// answer it cannot read that way (a 503 of another kind, a connection
// closed without an answer) is passed on, its body intact.
func TestUnsent(t *testing.T) {
	stopping := `{"error":{"code":"stopping","message":"proxyd is stopping"}}`
	other := `{"error":{"code":"unavailable","message":"not ready"}}`
	for _, tt := range []struct {
		name   string
		status int
		body   string
		sid    string
		err    error
		want   error // nil: taken; else errors.Is target
	}{
		{"answered", 200, `{"jsonrpc":"2.0","id":1,"result":{}}`, "s", nil, nil},
		{"stopping", 503, stopping, "s", nil, errProxydStopping},
		{"stopping, no session", 503, stopping, "", nil, errProxydStopping},
		{"another 503", 503, other, "s", nil, nil},
		{"a 503 that is not JSON", 503, "busy", "s", nil, nil},
		{"session unknown", 404, "", "s", nil, errSessionLost},
		{"404 without a session", 404, "", "", nil, nil},
		{"no socket", 0, "", "s", &net.OpError{Op: "dial", Err: syscall.ENOENT}, syscall.ENOENT},
		{"nobody listening", 0, "", "s", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, syscall.ECONNREFUSED},
		{"closed without an answer", 0, "", "s", io.EOF, nil},
	} {
		var resp *http.Response
		if tt.err == nil {
			resp = &http.Response{StatusCode: tt.status, Body: io.NopCloser(strings.NewReader(tt.body))}
		}
		got := unsent(resp, tt.err, tt.sid)
		if tt.want == nil && got != nil || tt.want != nil && !errors.Is(got, tt.want) {
			t.Errorf("%s: unsent = %v, want %v", tt.name, got, tt.want)
		}
		if got == nil && resp != nil {
			if b, _ := io.ReadAll(resp.Body); string(b) != tt.body {
				t.Errorf("%s: the body passed on is %q, want %q", tt.name, b, tt.body)
			}
		}
	}
}

// proxyd's refusal of a request reaches the client as the answer to that
// request: a JSON-RPC error proxyd gave without the id (it did not read
// the body) gets the request's id, and the control API's error shape
// becomes a JSON-RPC error. An error that answers the request already
// is passed as it is.
func TestRefusal(t *testing.T) {
	for _, tt := range []struct {
		name, id, body string
		status         int
		want           string // "": passed as it is
	}{
		{"too large, id null", `7`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"request body larger than limits.max_request_bytes"}}`, 413,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"request body larger than limits.max_request_bytes"}}`},
		{"no id at all", `"a"`, `{"jsonrpc":"2.0","error":{"code":-32600,"message":"m"}}`, 400,
			`{"jsonrpc":"2.0","id":"a","error":{"code":-32600,"message":"m"}}`},
		{"control API error", `7`, `{"error":{"code":"forbidden","message":"proxyd serves only the user that started it"}}`, 403,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"proxyd answered HTTP 403: proxyd serves only the user that started it"}}`},
		{"the request's own error", `7`, `{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"m"}}`, 404, ""},
		{"not JSON", `7`, `bad gateway`, 502, ""},
		{"a notification's refusal", ``, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"m"}}`, 413, ""},
	} {
		got := refusal(json.RawMessage(tt.id), tt.status, []byte(tt.body))
		if tt.want == "" {
			if got != nil {
				t.Errorf("%s: %s, want the body passed as it is", tt.name, got)
			}
			continue
		}
		var g, w any
		if json.Unmarshal(got, &g) != nil || json.Unmarshal([]byte(tt.want), &w) != nil || !reflect.DeepEqual(g, w) {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

// The bridge's GET stream is opened again after a second, later after
// each refusal in a row, or when a refusal's Retry-After says, within a
// bound: a bridge proxyd keeps refusing (at its cap of open streams)
// does not ask every second.
func TestListenRetry(t *testing.T) {
	tests := []struct {
		name       string
		failures   int
		retryAfter time.Duration
		want       time.Duration
	}{
		{"after a stream ended", 0, 0, time.Second},
		{"after one refusal", 1, 0, 2 * time.Second},
		{"after four", 4, 0, 16 * time.Second},
		{"after many", 40, 0, maxListenRetry},
		{"as Retry-After asks", 3, 5 * time.Second, 5 * time.Second},
		{"Retry-After bounded", 0, time.Hour, maxListenRetry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := listenRetry(tt.failures, tt.retryAfter); got != tt.want {
				t.Errorf("listenRetry(%d, %s) = %s, want %s", tt.failures, tt.retryAfter, got, tt.want)
			}
		})
	}
}
