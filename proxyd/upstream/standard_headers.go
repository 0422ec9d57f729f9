package upstream

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// standardHeaders covers what the MCP library leaves out of some requests
// (SEP-2243, SEP-2575):
//   - Mcp-Method on every POST, the initialize handshake and its
//     notification included;
//   - a request refused with -32022 (unsupported protocol version) although
//     the version it carried is among those the server lists as
//     supported is sent once more, as a client that negotiates would;
//   - a server/discover result without supportedVersions is not a modern
//     server's answer (some session-era servers answer any method with an
//     empty result): it reaches the library as "method not found", so the
//     connection falls back to the initialize handshake.
type standardHeaders struct{ next http.RoundTripper }

// methodField finds a JSON-RPC message's method near its start, where the
// library writes it; a body that has it further on keeps its headers.
var methodField = regexp.MustCompile(`"method"\s*:\s*"([A-Za-z0-9_/.\-]{1,128})"`)

// methodPeek bounds the bytes looked at for the method.
const methodPeek = 512

func (t standardHeaders) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.GetBody == nil {
		return t.next.RoundTrip(req)
	}
	if req.Header.Get(headerMethod) == "" {
		if m := peekMethod(req); m != "" {
			req = req.Clone(req.Context())
			req.Header.Set(headerMethod, m)
		}
	}
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusOK && req.Header.Get(headerMethod) == string(mcp.MethodServerDiscover) {
		return notModern(resp), nil
	}
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		return resp, err
	}
	version := req.Header.Get(mcp.HeaderProtocolVersion)
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if rerr != nil || version == "" || !rejectsListedVersion(body, version) {
		return resp, nil
	}
	nb, gerr := req.GetBody()
	if gerr != nil {
		return resp, nil
	}
	retry := req.Clone(req.Context())
	retry.Body = nb
	return t.next.RoundTrip(retry)
}

func peekMethod(req *http.Request) string {
	b, err := req.GetBody()
	if err != nil {
		return ""
	}
	defer b.Close()
	head := make([]byte, methodPeek)
	n, _ := io.ReadFull(b, head)
	if m := methodField.FindSubmatch(head[:n]); m != nil {
		return string(m[1])
	}
	return ""
}

// rejectsListedVersion reports a -32022 error whose supported versions
// include version.
func rejectsListedVersion(body []byte, version string) bool {
	var msg struct {
		Error *struct {
			Code int `json:"code"`
			Data struct {
				Supported []string `json:"supported"`
			} `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Error == nil || msg.Error.Code != mcp.UNSUPPORTED_PROTOCOL_VERSION {
		return false
	}
	return slices.Contains(msg.Error.Data.Supported, version)
}

// notModern turns a JSON server/discover result that lists no supported
// versions into a method-not-found error with the same id.
func notModern(resp *http.Response) *http.Response {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return resp
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return resp
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Result *struct {
			SupportedVersions []string `json:"supportedVersions"`
		} `json:"result"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Result == nil || len(msg.Result.SupportedVersions) > 0 || len(msg.ID) == 0 {
		return resp
	}
	out := []byte(`{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"error":{"code":-32601,"message":"server/discover answered without supportedVersions: not a modern server"}}`)
	resp.Body = io.NopCloser(bytes.NewReader(out))
	resp.ContentLength = int64(len(out))
	resp.Header.Del("Content-Length")
	return resp
}
