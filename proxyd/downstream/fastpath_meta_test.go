package downstream

import (
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// The fast path reads _meta through struct tags; they must name the keys
// the library uses.
func TestCallMetaKeys(t *testing.T) {
	b, _ := json.Marshal(map[string]any{mcp.MetaKeyProtocolVersion: "2026-07-28", "progressToken": 7})
	var m callMeta
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if string(m.ProtocolVersion) != `"2026-07-28"` || string(m.ProgressToken) != "7" {
		t.Fatalf("decoded %+v from %s", m, b)
	}
}
