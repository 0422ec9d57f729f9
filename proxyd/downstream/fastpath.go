package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// RawCaller is implemented by backends that can answer a tools/call with
// the upstream's result JSON as it came, which lets the endpoint skip
// decoding and re-encoding it.
type RawCaller interface {
	CallToolRaw(ctx context.Context, server, tool string, args json.RawMessage, meta CallMeta) (json.RawMessage, error)
}

// maxFastBody bounds a request the fast path reads; larger ones take the
// library's path.
const maxFastBody = 1 << 20

// callMeta is a tools/call's _meta, decoded once.
type callMeta map[string]json.RawMessage

// has reports a key in any spelling: the library reads some _meta keys
// through struct fields, which match case-insensitively, so the fast path
// steps aside for every spelling.
func (m callMeta) has(key string) bool {
	for k := range m {
		if strings.EqualFold(k, key) {
			return true
		}
	}
	return false
}

type route struct {
	server, tool string
	modern       bool // the upstream speaks the modern era
	// paramHeaders: a parameter is annotated with x-mcp-header, whose
	// Mcp-Param-* header the library checks against the body.
	paramHeaders bool
}

// routes maps exposed tool names to upstream tools; replaced whole by Sync.
type routes = map[string]route

// fastCall answers the common case, a legacy-era tools/call on a live
// session with a plain JSON body, without the MCP library: the request is
// decoded once, the upstream's result is passed through verbatim, and
// nothing else (session checks, headers, notifications) differs from the
// library's answer. Anything else returns false, with the body restored,
// for the library to handle.
func (s *Server) fastCall(w http.ResponseWriter, r *http.Request, client string) bool {
	if r.Method != http.MethodPost || r.URL.Path != "/mcp" {
		return false
	}
	sid := r.Header.Get("Mcp-Session-Id")
	version := r.Header.Get("Mcp-Protocol-Version")
	if version != "" && !mcp.IsValidProtocolVersion(version) {
		return false // the library answers an unsupported version
	}
	modern := version != "" && mcp.IsModernProtocol(version)
	if modern && r.Header.Get("Last-Event-ID") != "" {
		return false
	}
	switch {
	case modern && sid != "":
		return false
	case !modern && (sid == "" || !s.sessions.isLive(sid)):
		return false
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return false
	}
	rc, ok := s.backend.(RawCaller)
	if !ok {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxFastBody+1))
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
	if err != nil || len(body) > maxFastBody {
		return false
	}
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Meta      json.RawMessage `json:"_meta"`
			Task      json.RawMessage `json:"task"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.JSONRPC != "2.0" || msg.Method != string(mcp.MethodToolsCall) ||
		len(msg.ID) == 0 || bytes.Equal(msg.ID, []byte("null")) || len(msg.Params.Task) > 0 {
		return false
	}
	var cm callMeta
	if len(msg.Params.Meta) > 0 && json.Unmarshal(msg.Params.Meta, &cm) != nil {
		return false
	}
	if cm.has("progressToken") {
		return false // the library relays progress notifications
	}
	if cm.has(mcp.MetaKeyProtocolVersion) && !modern {
		return false // the era comes from _meta too: the library reconciles it with the header
	}
	meta := CallMeta{Client: "session:" + prefix(sid)}
	if modern {
		// The modern era validates every request on its own: the protocol
		// version in _meta must match the header, and the method and tool
		// are mirrored into headers. Anything off goes to the library,
		// which answers with the precise error.
		// The version is read as the library reads it: by exact key.
		var metaVersion string
		if json.Unmarshal(cm[mcp.MetaKeyProtocolVersion], &metaVersion) != nil || metaVersion != version ||
			r.Header.Get("Mcp-Method") != string(mcp.MethodToolsCall) || r.Header.Get("Mcp-Name") != msg.Params.Name {
			return false
		}
		meta.Client = "mcp"
	}
	if client != "" {
		meta.Client = client
	}
	t := s.table.Load()
	if t == nil {
		return false
	}
	rt, ok := (*t)[msg.Params.Name]
	// An unknown tool gets the library's error answer; a result crossing
	// eras gets the library's translation.
	if !ok || rt.modern != modern || modern && rt.paramHeaders {
		return false
	}
	if len(msg.Params.Arguments) > 0 && msg.Params.Arguments[0] != '{' && !bytes.Equal(msg.Params.Arguments, []byte("null")) {
		return false
	}
	raw, err := rc.CallToolRaw(r.Context(), rt.server, rt.tool, msg.Params.Arguments, meta)
	var out []byte
	if err != nil {
		out, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID,
			"error": map[string]any{"code": mcp.INTERNAL_ERROR, "message": err.Error()}})
	} else {
		out = make([]byte, 0, len(raw)+len(msg.ID)+32)
		out = append(out, `{"jsonrpc":"2.0","id":`...)
		out = append(out, msg.ID...)
		out = append(out, `,"result":`...)
		out = append(out, raw...)
		out = append(out, '}')
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	return true
}
