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

// A routed request's params reach the upstream as the client sent them
// but for the target's name and the client's _meta: without either to
// change there is no edit, and none looks for a _meta that is not there
// (a pass over params that can be megabytes).
func TestRouteEdits(t *testing.T) {
	s := &Server{}
	rt := newRoutes()
	rt.tools["fx__echo"] = route{server: "fx", tool: "echo"}
	rt.tools["echo"] = route{server: "fx", tool: "echo"}
	rt.prompts["greet"] = promptRoute{server: "fx", name: "greet"}
	rt.resources["file:///a"] = "fx"
	s.table.Store(rt)
	tests := []struct {
		method, params, want string
		edit                 bool
	}{
		{"tools/call", `{"name":"echo","arguments":{"":1}}`, `{"name":"echo","arguments":{"":1}}`, false},
		{"tools/call", `{"name":"echo","arguments":{},"_meta":{"progressToken":1}}`, `{"name":"echo","arguments":{}}`, true},
		{"tools/call", `{"name":"fx__echo","arguments":{},"":1}`, `{"name":"echo","arguments":{},"":1}`, true},
		{"tools/call", `{"name":"fx__echo","_meta":{}}`, `{"name":"echo"}`, true},
		{"prompts/get", `{"name":"greet"}`, `{"name":"greet"}`, false},
		{"resources/read", `{"uri":"file:///a","":2}`, `{"uri":"file:///a","":2}`, false},
		{"resources/read", `{"_meta":{},"uri":"file:///a"}`, `{"uri":"file:///a"}`, true},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"a","value":""}}`, `{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"a","value":""}}`, false},
	}
	for _, tt := range tests {
		var pv paramValues
		if !relay.Fields([]byte(tt.params), paramKeys[:], pv[:]) {
			t.Fatalf("%s: ambiguous", tt.params)
		}
		r, ok := s.route(relay.Message{Method: tt.method, Params: []byte(tt.params)}, &pv)
		if !ok {
			t.Fatalf("%s %s: not routed", tt.method, tt.params)
		}
		if got := r.Edit.Apply(r.Params); string(got) != tt.want {
			t.Errorf("%s %s: upstream gets %s, want %s", tt.method, tt.params, got, tt.want)
		}
		if (r.Edit != nil) != tt.edit {
			t.Errorf("%s %s: edit %+v, want one: %v", tt.method, tt.params, r.Edit, tt.edit)
		}
	}
}
