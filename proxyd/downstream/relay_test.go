package downstream

import (
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// The standard headers check decides as the library's check on the whole
// params does, with and without its shortcuts.
func TestStandardHeadersCheck(t *testing.T) {
	const version = "2026-07-28"
	tests := []struct {
		method, params, header string
	}{
		{"tools/call", `{"name":"echo","arguments":{"text":"x"},"_meta":{"a":1}}`, "echo"},
		{"tools/call", `{"name":"echo","arguments":{"text":"x"}}`, "other"},
		{"tools/call", `{"arguments":{"text":"x"}}`, "echo"},
		{"tools/call", `{"name":7}`, "7"},
		{"tools/call", `{"name":"caf\u00e9"}`, "=?base64?Y2Fmw6k=?="},
		{"prompts/get", `{"name":"greet","arguments":{}}`, "greet"},
		{"resources/read", `{"uri":"file:///a b"}`, "file:///a b"},
		{"resources/read", `{"uri":"file:///a"}`, "file:///b"},
		{"resources/read", `{"uri":"file:///a"}`, "=?base64?ZmlsZTovLy9h?="},
		{"resources/read", `{"uri":"file:///a"}`, "=?base64?not base64?="},
		{"tools/call", `{"name":"echo"}`, ""},
		{"tools/call", `{"name":""}`, ""},
		{"tools/call", `{"name":"a\"b"}`, `a"b`},
		{"tools/call", `{"name":null}`, ""},
		{"prompts/get", `{"name":"greet"}`, "echo"},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"x"}}`, ""},
		{"tools/list", `{}`, ""},
	}
	for _, tt := range tests {
		get := func(h string) string {
			switch h {
			case mcp.HeaderMethod:
				return tt.method
			case mcp.HeaderName:
				return tt.header
			}
			return ""
		}
		m := mcp.MCPMethod(tt.method)
		whole := mcp.ValidateStandardHeaders(get, version, m, []byte(tt.params)) == nil
		var pv paramValues
		relay.Fields([]byte(tt.params), paramKeys[:], pv[:])
		if got := standardHeadersValid(get, version, tt.method, []byte(tt.params), &pv); got != whole {
			t.Errorf("%s %s with Mcp-Name %q: valid %v, the library says %v", tt.method, tt.params, tt.header, got, whole)
		}
	}
}

// The relay takes only JSON-RPC 2.0 messages; the library answers the
// rest with its own error.
func TestClientMessage(t *testing.T) {
	tests := []struct {
		body, method string
		ok           bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, "tools/call", true},
		{`{"jsonrpc":"2\u002e0","id":1,"method":"tools\/call"}`, "tools/call", true},
		{`{"jsonrpc":"2.0","id":"mcpx-s-1","method":null,"result":{}}`, "", true}, // a response
		{`{"jsonrpc":"2.0","id":1,"method":5}`, "", false},
		{`{"id":1,"method":"tools/call"}`, "", false},
		{`{"jsonrpc":null,"id":1,"method":"tools/call"}`, "", false},
		{`{"jsonrpc":"1.0","id":1,"method":"tools/call"}`, "", false},
		{`{"jsonrpc":2,"id":1,"method":"tools/call"}`, "", false},
		{`[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]`, "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call"`, "", false},
	}
	for _, tt := range tests {
		msg, ok := clientMessage([]byte(tt.body))
		if ok != tt.ok || ok && msg.Method != tt.method {
			t.Errorf("clientMessage(%s) = %q, %v; want %q, %v", tt.body, msg.Method, ok, tt.method, tt.ok)
		}
	}
}
