package upstream

import (
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// The isError proxyd records is the one the MCP library reads from the
// same result, however often and in whatever case the member appears.
func TestCallResultIsErrorAsTheLibraryReads(t *testing.T) {
	for _, raw := range []string{
		`{"content":[]}`,
		`{"content":[],"isError":true}`,
		`{"isError":false,"content":[]}`,
		`{"content":[],"isError":false,"isError":true}`,
		`{"content":[],"isError":true,"isError":false}`,
		`{"content":[],"isError":false,"ISERROR":true}`,
		`{"content":[],"i\u0073Error":true}`,
	} {
		got := NewCallResult(json.RawMessage(raw))
		b := json.RawMessage(raw)
		typed, err := mcp.ParseCallToolResult(&b)
		if err != nil {
			t.Fatalf("%s: the library cannot read it: %v", raw, err)
		}
		if got.IsError != typed.IsError {
			t.Errorf("%s: isError recorded %v, the library reads %v", raw, got.IsError, typed.IsError)
		}
	}
}
