package downstream

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// countingBackend relays every call to nowhere, counting them.
type countingBackend struct {
	hintBackend
	calls atomic.Int64
}

func (b *countingBackend) Relay(context.Context, *Call) (json.RawMessage, error) {
	b.calls.Add(1)
	return json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`), nil
}

// A request whose id is not a string or a number is refused (-32600,
// HTTP 400) in either era, whatever its method, and a call never runs, as
// is one whose id is a string of invalid UTF-8 (its echo would be invalid
// JSON); a progressToken that is neither is invalid params. Good ids come back as
// sent, digit for digit.
func TestRequestIDsAndTokens(t *testing.T) {
	b := &countingBackend{}
	_, srv := startEndpoint(t, b)
	// A legacy session's call, as progressCall makes one, with its body
	// replaced.
	legacy := progressCall(t, srv.URL+"/mcp", false)
	sid := legacy.Header.Get("Mcp-Session-Id")
	post := func(modern bool, id, meta string) (int, string) {
		t.Helper()
		var req *http.Request
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{` + meta
		if modern {
			req = progressCall(t, srv.URL+"/mcp", true)
			if meta != "" {
				body += ","
			}
			body += `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
		} else {
			req = legacy.Clone(context.Background())
			req.Header.Set("Mcp-Session-Id", sid)
		}
		body += `}}}`
		req.Body = io.NopCloser(strings.NewReader(body))
		req.ContentLength = int64(len(body))
		return roundTrip(t, req)
	}
	for _, modern := range []bool{false, true} {
		for _, id := range []string{`{"a":1}`, `[1,2]`, `true`, `null`, "[1,\n\n2]", "\"a\xffb\""} {
			before := b.calls.Load()
			status, body := post(modern, id, "")
			if status != http.StatusBadRequest || !strings.Contains(body, `"code":-32600`) || !strings.Contains(body, `"id":null`) {
				t.Errorf("modern %v, id %s: %d %s, want 400 with -32600", modern, id, status, body)
			}
			if b.calls.Load() != before {
				t.Errorf("modern %v, id %s: the call ran", modern, id)
			}
		}
		for _, tok := range []string{`{"a":1}`, `[1]`, `false`, "\"t\xc3\""} {
			status, body := post(modern, "7", `"progressToken":`+tok)
			if !strings.Contains(body, `"code":-32602`) || !strings.Contains(body, `"id":7`) {
				t.Errorf("modern %v, progressToken %s: %d %s, want -32602 for id 7", modern, tok, status, body)
			}
		}
		for _, id := range []string{`9007199254740993`, `18446744073709551617`, `"s-1"`, `-3`} {
			status, body := post(modern, id, "")
			if status != http.StatusOK || !strings.Contains(body, `"id":`+id+`,`) {
				t.Errorf("modern %v, id %s: %d %s, want the id as sent", modern, id, status, body)
			}
		}
	}
}

// A legacy request without the session id initialize gave is a 400, as
// the spec has it (a 404 would tell the client a session it never sent
// had ended); initialize itself needs none.
func TestLegacyPostWithoutSession(t *testing.T) {
	const token = testToken
	_, srv := startEndpoint(t, &countingBackend{})
	post := func(body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		return roundTrip(t, req)
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`,
		`{"jsonrpc":"2.0","id":"l","method":"tools/list"}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	} {
		if status, out := post(body); status != http.StatusBadRequest || !strings.Contains(out, "Mcp-Session-Id") || !strings.Contains(out, `"code":-32600`) {
			t.Errorf("%s: %d %s, want 400 naming the header", body, status, out)
		}
	}
	if status, out := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`); status != http.StatusOK {
		t.Errorf("initialize: %d %s", status, out)
	}
}

// A request the MCP library answers (ping, a list, initialize) comes back
// with its id as sent, in either era: ids the library would re-encode (a
// number beyond 2^53, 1.0, 1e50, a string with escapes) included, and
// the answer is otherwise the library's.
func TestLibraryAnswersKeepIDs(t *testing.T) {
	_, srv := startEndpoint(t, hintBackend{})
	legacy := progressCall(t, srv.URL+"/mcp", false)
	sid := legacy.Header.Get("Mcp-Session-Id")
	const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	post := func(modern bool, method, id string) (int, string) {
		t.Helper()
		var body string
		req := legacy.Clone(context.Background())
		switch {
		case modern:
			body = `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":{` + modernMeta + `}}`
			req = progressCall(t, srv.URL+"/mcp", true)
			req.Header.Set("Mcp-Method", method)
			req.Header.Del("Mcp-Name")
		case method == "initialize":
			body = `{"jsonrpc":"2.0","id":` + id + `,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
			req.Header.Del("Mcp-Session-Id")
		default:
			body = `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `"}`
			req.Header.Set("Mcp-Session-Id", sid)
		}
		req.Body = io.NopCloser(strings.NewReader(body))
		req.ContentLength = int64(len(body))
		return roundTrip(t, req)
	}
	ids := []string{`9007199254740993`, `18446744073709551617`, `1.0`, `1e50`, `-0`, `"a\/b"`, `"\u0041"`, `"a<b&c"`, `"é"`, `7`, `"s-1"`}
	for _, tt := range []struct {
		modern bool
		method string
	}{
		{false, "ping"}, {false, "tools/list"}, {false, "prompts/list"}, {false, "initialize"}, {false, "logging/setLevel"},
		{true, "ping"}, {true, "tools/list"}, {true, "server/discover"},
	} {
		_, plain := post(tt.modern, tt.method, "7")
		for _, id := range ids {
			status, body := post(tt.modern, tt.method, id)
			if !strings.Contains(body, `"id":`+id+`,`) || strings.Contains(body, standInPrefix) {
				t.Errorf("modern %v, %s with id %s: %d %s, want the id as sent", tt.modern, tt.method, id, status, body)
			} else if got := strings.Replace(body, `"id":`+id+`,`, `"id":7,`, 1); got != plain {
				t.Errorf("modern %v, %s with id %s: %s, want the answer to id 7 with the id as sent: %s", tt.modern, tt.method, id, body, plain)
			}
		}
	}
}

func TestEchoedExactly(t *testing.T) {
	for _, tt := range []struct {
		id   string
		want bool
	}{
		{`1`, true}, {`-12`, true}, {`900719925474099`, true}, {`9007199254740992`, true},
		{`9007199254740993`, false}, {`1.0`, false}, {`1.5`, true}, {`1e50`, false}, {`-0`, false}, {`0`, true},
		{`{"a":1}`, false},
		{`"x"`, true}, {`""`, true}, {`"a\/b"`, false}, {`"a\"b"`, true}, {`"\u0041"`, false},
		{`"a<b"`, false}, {`"a&b"`, false}, {`"é"`, true}, {"\"\xff\"", false},
	} {
		if got := echoedExactly(json.RawMessage(tt.id)); got != tt.want {
			t.Errorf("echoedExactly(%s) = %v, want %v", tt.id, got, tt.want)
		}
	}
}
