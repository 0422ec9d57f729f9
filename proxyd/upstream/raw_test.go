package upstream

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

func TestWithMeta(t *testing.T) {
	meta := json.RawMessage(`{"k":1}`)
	tests := []struct {
		name, params, want string
	}{
		{"no params", ``, `{"_meta":{"k":1}}`},
		{"empty object", `{}`, `{"_meta":{"k":1}}`},
		{"empty object with spaces", ` { } `, `{ "_meta":{"k":1}}`},
		{"fields", `{"name":"echo"}`, `{"name":"echo","_meta":{"k":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var params json.RawMessage
			if tt.params != "" {
				params = json.RawMessage(tt.params)
			}
			got := withMeta(params, meta)
			if string(got) != tt.want || !json.Valid(got) {
				t.Fatalf("withMeta(%q) = %s, want %s", tt.params, got, tt.want)
			}
		})
	}
}

func TestCallParams(t *testing.T) {
	tests := []struct {
		name, tool, args, want string
	}{
		{"no arguments", "echo", ``, `{"name":"echo"}`},
		{"null arguments", "echo", `null`, `{"name":"echo"}`},
		{"arguments", "echo", `{"text":"hi"}`, `{"name":"echo","arguments":{"text":"hi"}}`},
		{"name needing escapes", `we"ird<`, `{}`, `{"name":"we\"ird\u003c","arguments":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := callParams(tt.tool, json.RawMessage(tt.args))
			if err != nil || string(got) != tt.want || !json.Valid(got) {
				t.Fatalf("callParams = %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}

// rawRequest sets the standard headers itself; they must be the ones the
// library would set for the same request.
func TestStandardHeadersMatchLibrary(t *testing.T) {
	for _, name := range []string{"echo", "tool with spaces", "ünïcode", ""} {
		params, _ := callParams(name, json.RawMessage(`{"a":1}`))
		want := mcp.StandardHeaders(mcp.LATEST_PROTOCOL_VERSION, mcp.MethodToolsCall, params)
		got := map[string]string{mcp.HeaderMethod: string(mcp.MethodToolsCall)}
		if v, ok := mcp.EncodeHeaderValue(name); ok {
			got[mcp.HeaderName] = v
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%q: headers %v, library %v", name, got, want)
		}
	}
}
