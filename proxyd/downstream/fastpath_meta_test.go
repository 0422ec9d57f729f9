package downstream

import (
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// The fast path finds the library's _meta keys: the protocol version by
// its exact key, and the presence of a key in any spelling.
func TestCallMetaKeys(t *testing.T) {
	b, _ := json.Marshal(map[string]any{mcp.MetaKeyProtocolVersion: "2026-07-28", "ProgressToken": 7})
	var m callMeta
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if string(m[mcp.MetaKeyProtocolVersion]) != `"2026-07-28"` || !m.has("progressToken") || m.has("task") {
		t.Fatalf("decoded %v from %s", m, b)
	}
}
