package downstream

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// The MCP library decodes a request's id into a Go value and encodes
// that value in its answer: a number beyond 2^53 loses digits
// (9007199254740993 comes back 9007199254740992), 1.0 comes back 1, 1e50
// 1e+50, and a string's escapes come back decoded. A client matches
// answers to requests by id, so such a request would never be answered.
// The relay sends its own requests' ids back as they came; for a request
// the library answers at once (oneShot), proxyd gives the library an id
// of its own and puts the client's back in the answer.

// oneShot are the requests the library answers with one small response
// as soon as it has them: their answers can be held and mended whole.
// (A call, a listen or anything else the library might stream, or a
// client might cancel by its id, keeps the library's encoding.)
var oneShot = map[string]bool{
	string(mcp.MethodPing):                   true,
	string(mcp.MethodInitialize):             true,
	string(mcp.MethodToolsList):              true,
	string(mcp.MethodPromptsList):            true,
	string(mcp.MethodResourcesList):          true,
	string(mcp.MethodResourcesTemplatesList): true,
	string(mcp.MethodSetLogLevel):            true,
	string(mcp.MethodServerDiscover):         true,
}

// echoedExactly reports whether the library answers id with the same
// bytes. It decodes ids two ways (into an any, and into an
// mcp.RequestId), so both are tried.
func echoedExactly(id json.RawMessage) bool {
	if plainID(id) {
		return true
	}
	var v any
	var rid mcp.RequestId
	return sameAfter(id, &v) && sameAfter(id, &rid)
}

// sameAfter reports whether id decoded into v encodes as id again.
func sameAfter(id json.RawMessage, v any) bool {
	if json.Unmarshal(id, v) != nil {
		return false // not the library's to echo either: a stand-in is as good
	}
	out, err := json.Marshal(v)
	return err == nil && bytes.Equal(out, id)
}

// plainID reports, without decoding it, an id the library echoes as it
// came: a short integer in its plain form, or a string of printable ASCII
// without escapes or the characters encoding/json escapes (<, >, &).
func plainID(id json.RawMessage) bool {
	switch {
	case len(id) >= 2 && id[0] == '"':
		for _, c := range id[1 : len(id)-1] {
			if c < 0x20 || c >= 0x7f || c == '\\' || c == '<' || c == '>' || c == '&' {
				return false
			}
		}
		return true
	case len(id) == 0 || len(id) > 15:
		return false
	}
	digits := id
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || digits[0] == '0' && len(id) > 1 { // 01, -0
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// stand-in ids are proxyd's own: a prefix no client id has by chance,
// and a count.
var standIns atomic.Uint64

const standInPrefix = "mcpx-id-"

// idRestorer is the ResponseWriter the library answers a oneShot request
// with a stand-in id through: it holds the answer until the library is
// done, then writes it with the client's id in place of the stand-in.
type idRestorer struct {
	http.ResponseWriter
	standIn []byte // quoted, as the library encodes it
	id      json.RawMessage
	status  int
	buf     bytes.Buffer
}

// restoreID returns body with its id replaced by a stand-in, and the
// writer that puts id back in what the library writes to w.
func restoreID(w http.ResponseWriter, body []byte, id json.RawMessage) ([]byte, *idRestorer) {
	standIn := strconv.AppendQuote(nil, standInPrefix+strconv.FormatUint(standIns.Add(1), 10))
	return relay.WithMember(body, "id", standIn), &idRestorer{ResponseWriter: w, standIn: standIn, id: id}
}

func (ir *idRestorer) WriteHeader(status int) {
	if ir.status == 0 {
		ir.status = status
	}
}

func (ir *idRestorer) Write(b []byte) (int, error) {
	if ir.status == 0 {
		ir.status = http.StatusOK
	}
	return ir.buf.Write(b)
}

// Flush holds the answer still: it leaves in finish, whole.
func (ir *idRestorer) Flush() {}

// Unwrap lets http.ResponseController reach the connection's writer.
func (ir *idRestorer) Unwrap() http.ResponseWriter { return ir.ResponseWriter }

// finish writes the answer, the client's id back in it.
func (ir *idRestorer) finish() {
	out := ir.buf.Bytes()
	ir.ResponseWriter.Header().Del("Content-Length") // the id's length differs
	if ir.status != 0 {
		ir.ResponseWriter.WriteHeader(ir.status)
	}
	if i := bytes.Index(out, ir.standIn); i >= 0 {
		_, _ = ir.ResponseWriter.Write(out[:i])
		_, _ = ir.ResponseWriter.Write(ir.id)
		out = out[i+len(ir.standIn):]
	}
	_, _ = ir.ResponseWriter.Write(out)
}
