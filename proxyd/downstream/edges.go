package downstream

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// endpointPath is where the endpoint serves MCP; anything else is 404, so
// a stray GET does not open a stream.
const endpointPath = "/mcp"

// bearerOK checks an Authorization header against the token: the scheme in
// any case (RFC 7235), the credentials compared in constant time.
func bearerOK(header, token string) bool {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(cred)), []byte(token)) == 1
}

// refuseBatch answers a JSON-RPC batch (a body that is an array) with an
// invalid-request error saying so; the library would call it invalid JSON.
// Other bodies are left whole for the handler.
func refuseBatch(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
		return false
	}
	var head []byte
	buf := make([]byte, 64)
	for len(head) < 4096 {
		n, err := r.Body.Read(buf)
		head = append(head, buf[:n]...)
		if len(bytes.TrimLeft(head, " \t\r\n")) > 0 || err != nil {
			break
		}
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	if trimmed := bytes.TrimLeft(head, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '[' {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(mcp.NewJSONRPCError(mcp.NewRequestId(nil), mcp.INVALID_REQUEST,
		"JSON-RPC batches are not supported: MCP removed them in protocol version 2025-06-18; send one message per request", nil))
	return true
}
