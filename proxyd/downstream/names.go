package downstream

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Separator joins a server name and a tool name: `<server>__<tool>`.
// Server names cannot contain "_", so the first "__" always splits them.
const Separator = "__"

// MaxNameLen is the longest exposed name; many LLM clients reject longer
// tool names although MCP allows 128.
const MaxNameLen = 64

// ExposedName is the namespaced name of an upstream tool or prompt. Names
// keep to MCP's rules ([A-Za-z0-9_.-]); invalid characters become "_" and
// names over MaxNameLen are shortened with a stable hash suffix.
func ExposedName(server, name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	full := server + Separator + b.String()
	if len(full) <= MaxNameLen && b.String() == name {
		return full
	}
	// Sanitised or too long: a hash keeps names that end up alike apart.
	sum := sha256.Sum256([]byte(server + "\x00" + name))
	suffix := "-" + hex.EncodeToString(sum[:3])
	if len(full)+len(suffix) > MaxNameLen {
		full = full[:MaxNameLen-len(suffix)]
	}
	return full + suffix
}
