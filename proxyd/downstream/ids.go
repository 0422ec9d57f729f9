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
// the library answers, proxyd gives the library an id of its own and puts
// the client's back in the answer.

// echoedExactly reports whether the library answers id with the same
// bytes.
func echoedExactly(id json.RawMessage) bool {
	if plainID(id) {
		return true
	}
	var v mcp.RequestId
	if json.Unmarshal(id, &v) != nil {
		return true // the library refuses it: no answer to match
	}
	out, err := json.Marshal(v)
	return err == nil && bytes.Equal(out, id)
}

// plainID reports, without decoding it, an id the library echoes as it
// came: a short integer in its plain form, or a string without escapes.
func plainID(id json.RawMessage) bool {
	switch {
	case len(id) >= 2 && id[0] == '"':
		return bytes.IndexByte(id[1:len(id)-1], '\\') < 0
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

// idRestorer is the ResponseWriter the library answers a request with a
// stand-in id through: it holds the answer (a single response, small:
// ping, initialize, a list) until the library is done, then writes it
// with the client's id in place of the stand-in.
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
	out := bytes.Replace(ir.buf.Bytes(), ir.standIn, ir.id, 1)
	h := ir.ResponseWriter.Header()
	if h.Get("Content-Length") != "" {
		h.Set("Content-Length", strconv.Itoa(len(out)))
	}
	if ir.status != 0 {
		ir.ResponseWriter.WriteHeader(ir.status)
	}
	_, _ = ir.ResponseWriter.Write(out)
}
