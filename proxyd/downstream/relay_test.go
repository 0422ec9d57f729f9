package downstream

import (
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// The Mcp-Name check on the name member alone decides as the check on
// the whole params does.
func TestNameOnlyHeaderCheck(t *testing.T) {
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
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"x"}}`, ""},
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
		alone := mcp.ValidateStandardHeaders(get, version, m, nameOnly(tt.method, []byte(tt.params))) == nil
		if whole != alone {
			t.Errorf("%s %s with Mcp-Name %q: whole params valid %v, name alone %v", tt.method, tt.params, tt.header, whole, alone)
		}
	}
}
