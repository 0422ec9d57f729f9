package upstream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/mcpx-dev/mcpx/proxyd/relay"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// rawIDs numbers the requests mcpx sends itself. String ids keep them apart
// from the library's own integer ids on the same transport.
var rawIDs atomic.Int64

// RPCError is a JSON-RPC error answered by the upstream, code kept (mcp-go
// turns non-standard codes into plain text).
type RPCError = relay.RPCError

// The standard headers, in canonical form.
var (
	headerMethod = http.CanonicalHeaderKey(mcp.HeaderMethod)
	headerName   = http.CanonicalHeaderKey(mcp.HeaderName)
)

// wire is what every request on one connection carries besides its own
// params: the negotiated protocol version and, in the modern era, the
// _meta the library adds to every request (protocol version, client
// capabilities, client info), encoded once per connection, and its parts
// for relayed requests, which carry the client's capabilities instead.
type wire struct {
	version string
	meta    json.RawMessage

	versionJSON, caps, info json.RawMessage
}

func (w wire) modern() bool { return w.meta != nil }

func newWire(cl *client.Client, version string, info mcp.Implementation) (wire, error) {
	w := wire{version: version}
	if !mcp.IsModernProtocol(version) {
		return w, nil
	}
	var err error
	if w.versionJSON, err = json.Marshal(version); err != nil {
		return w, fmt.Errorf("encoding request _meta: %w", err)
	}
	if w.caps, err = json.Marshal(cl.GetClientCapabilities()); err != nil {
		return w, fmt.Errorf("encoding request _meta: %w", err)
	}
	if w.info, err = json.Marshal(info); err != nil {
		return w, fmt.Errorf("encoding request _meta: %w", err)
	}
	meta, err := json.Marshal(map[string]any{
		mcp.MetaKeyProtocolVersion:    version,
		mcp.MetaKeyClientCapabilities: cl.GetClientCapabilities(),
		mcp.MetaKeyClientInfo:         info,
	})
	if err != nil {
		return w, fmt.Errorf("encoding request _meta: %w", err)
	}
	w.meta = meta
	return w, nil
}

// rawRequest sends method with params (a JSON object proxyd built, without
// _meta, or nil) on cl's transport and returns the raw result. For a
// tools/call, name is the tool and tool its definition (nil if unknown):
// parameters it annotates with x-mcp-header are mirrored into
// Mcp-Param-* headers, as clients must (SEP-2243). In the modern era it
// adds what the library adds to every request (_meta, the Mcp-Method and
// Mcp-Name headers).
func rawRequest(ctx context.Context, cl *client.Client, w wire, method, name string, tool *Tool, params json.RawMessage) (json.RawMessage, error) {
	id := "mcpx-" + strconv.FormatInt(rawIDs.Add(1), 10)
	req := transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      mcp.NewRequestId(id),
		Method:  method,
	}
	if meta := joinMeta(w.meta, metaFrom(ctx)); meta != nil {
		params = withMeta(params, meta)
	}
	if w.meta != nil {
		if mcp.RequiresStandardHeaders(w.version) {
			req.Header = http.Header{headerMethod: {method}}
			if v, ok := mcp.EncodeHeaderValue(name); method == string(mcp.MethodToolsCall) && ok {
				req.Header[headerName] = []string{v}
			}
			if tool != nil && tool.ParamHeaders {
				for k, v := range mcp.GenerateParamHeaders(&tool.Tool, params) {
					req.Header.Set(k, v)
				}
			}
		}
	}
	if params != nil {
		req.Params = params
	}
	resp, err := cl.GetTransport().SendRequest(ctx, req)
	if err != nil {
		return nil, transport.NewError(err)
	}
	if err := libraryReplyFor(resp, id); err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, &RPCError{Code: resp.Error.Code, Message: resp.Error.Message, Data: rawData(resp.Error.Data)}
	}
	return resp.Result, nil
}

// withMeta adds "_meta": meta to the JSON object params (nil: none).
func withMeta(params, meta json.RawMessage) json.RawMessage {
	open, tail := metaParts([][]byte{params}, meta)
	return bytes.Join(append(open, tail), nil)
}

// metaParts splits params (parts that join to them) with "_meta": meta
// added into the parts up to the params' closing brace (sub-slices, not
// copies) and the rest: the caller joins them with what surrounds them,
// so large params are copied once.
func metaParts(params [][]byte, meta json.RawMessage) (open [][]byte, tail []byte) {
	params = trimParts(params)
	if size(params) < 2 {
		params = [][]byte{[]byte("{}")}
	}
	last := params[len(params)-1]
	open = append(params[:len(params)-1:len(params)-1], last[:len(last)-1])
	tail = make([]byte, 0, len(meta)+10)
	if hasMembers(open) {
		tail = append(tail, ',')
	}
	tail = append(tail, `"_meta":`...)
	tail = append(tail, meta...)
	return open, append(tail, '}')
}

// trimParts is parts without the spaces the whole they join to starts and
// ends with, and without empty parts.
func trimParts(parts [][]byte) [][]byte {
	out := make([][]byte, 0, len(parts))
	for _, p := range parts {
		if len(out) == 0 {
			p = bytes.TrimLeft(p, " \t\r\n")
		}
		if len(p) > 0 {
			out = append(out, p)
		}
	}
	for len(out) > 0 {
		last := bytes.TrimRight(out[len(out)-1], " \t\r\n")
		if len(last) > 0 {
			out[len(out)-1] = last
			break
		}
		out = out[:len(out)-1]
	}
	return out
}

// hasMembers reports whether open, an object's parts up to its closing
// brace, holds anything but spaces after its opening brace.
func hasMembers(open [][]byte) bool {
	first := true
	for _, p := range open {
		if first && len(p) > 0 {
			p, first = p[1:], false
		}
		if len(bytes.TrimLeft(p, " \t\r\n")) > 0 {
			return true
		}
	}
	return false
}

func size(parts [][]byte) int {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	return n
}

// CallParams encodes the params of a tools/call.
func CallParams(name string, args json.RawMessage) (json.RawMessage, error) {
	n, err := json.Marshal(name)
	if err != nil {
		return nil, fmt.Errorf("encoding the tool name: %w", err)
	}
	args = bytes.TrimSpace(args)
	out := make([]byte, 0, len(n)+len(args)+24)
	out = append(out, `{"name":`...)
	out = append(out, n...)
	if len(args) > 0 && string(args) != "null" {
		out = append(out, `,"arguments":`...)
		out = append(out, args...)
	}
	return append(out, '}'), nil
}

func rawData(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// Tool is an upstream tool with its schemas kept verbatim and a hash of its
// whole definition (a changed hash means a changed tool).
type Tool struct {
	mcp.Tool
	Raw  json.RawMessage
	Hash string
	// ParamHeaders: some parameter is annotated with x-mcp-header.
	ParamHeaders bool
}

// ReadOnly is the retry-safety rule: readOnlyHint true and not destructive.
func (t Tool) ReadOnly() bool {
	a := t.Annotations
	return a.ReadOnlyHint != nil && *a.ReadOnlyHint && (a.DestructiveHint == nil || !*a.DestructiveHint)
}

// Destructive is the tool's destructiveHint (MCP's default is true when
// the tool is not read-only).
func (t Tool) Destructive() bool {
	a := t.Annotations
	if a.DestructiveHint != nil {
		return *a.DestructiveHint
	}
	return !(a.ReadOnlyHint != nil && *a.ReadOnlyHint)
}

// listToolsRaw pages through tools/list keeping each tool's JSON.
func listToolsRaw(ctx context.Context, cl *client.Client, w wire) ([]Tool, error) {
	var out []Tool
	cursor := ""
	for page := 0; page < 100; page++ {
		var params json.RawMessage
		if cursor != "" {
			c, _ := json.Marshal(cursor)
			params = json.RawMessage(`{"cursor":` + string(c) + `}`)
		}
		res, err := rawRequest(ctx, cl, w, string(mcp.MethodToolsList), "", nil, params)
		if err != nil {
			return nil, err
		}
		var body struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &body); err != nil {
			return nil, fmt.Errorf("decoding tools/list: %w", err)
		}
		for _, raw := range body.Tools {
			t, err := parseTool(raw)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
		if body.NextCursor == "" || body.NextCursor == cursor {
			return out, nil
		}
		cursor = body.NextCursor
	}
	return out, nil
}

func parseTool(raw json.RawMessage) (Tool, error) {
	var t mcp.Tool
	if err := json.Unmarshal(raw, &t); err != nil {
		return Tool{}, fmt.Errorf("decoding a tool of tools/list: %w", err)
	}
	var schemas struct {
		Input  json.RawMessage `json:"inputSchema"`
		Output json.RawMessage `json:"outputSchema"`
	}
	_ = json.Unmarshal(raw, &schemas)
	if len(schemas.Input) > 0 && string(schemas.Input) != "null" {
		t.InputSchema = mcp.ToolInputSchema{}
		t.RawInputSchema = schemas.Input
	}
	if len(schemas.Output) > 0 && string(schemas.Output) != "null" {
		t.OutputSchema = mcp.ToolOutputSchema{}
		t.RawOutputSchema = schemas.Output
	}
	sum := sha256.Sum256(raw)
	return Tool{Tool: t, Raw: append(json.RawMessage(nil), raw...), Hash: hex.EncodeToString(sum[:8]),
		ParamHeaders: len(mcp.ExtractParamHeaderBindings(&t)) > 0}, nil
}
