package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// rawIDs numbers the requests mcpx sends itself. String ids keep them apart
// from the library's own integer ids on the same transport.
var rawIDs atomic.Int64

// RPCError is a JSON-RPC error answered by the upstream, code kept (mcp-go
// turns non-standard codes into plain text).
type RPCError struct {
	Code    int
	Message string
	Data    json.RawMessage
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("upstream answered JSON-RPC error %d: %s", e.Code, e.Message)
}

// rawRequest sends method/params on cl's transport and returns the raw
// result. In the modern era it adds what the library adds to every request
// (protocol metadata in _meta, Mcp-Method/Mcp-Name headers).
func rawRequest(ctx context.Context, cl *client.Client, clientInfo mcp.Implementation, method string, params map[string]any) (json.RawMessage, error) {
	var header http.Header
	if v := cl.ProtocolVersion(); mcp.IsModernProtocol(v) {
		if params == nil {
			params = map[string]any{}
		}
		meta, _ := params["_meta"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		meta[mcp.MetaKeyProtocolVersion] = v
		meta[mcp.MetaKeyClientCapabilities] = cl.GetClientCapabilities()
		meta[mcp.MetaKeyClientInfo] = clientInfo
		params["_meta"] = meta
		encoded, err := json.Marshal(params)
		if err != nil {
			return nil, fmt.Errorf("encoding %s params: %w", method, err)
		}
		if std := mcp.StandardHeaders(v, mcp.MCPMethod(method), encoded); len(std) > 0 {
			header = http.Header{}
			for k, val := range std {
				header.Set(k, val)
			}
		}
	}
	req := transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      mcp.NewRequestId(fmt.Sprintf("mcpx-%d", rawIDs.Add(1))),
		Method:  method,
		Params:  params,
		Header:  header,
	}
	var p any = params
	if params == nil {
		p = nil
		req.Params = p
	}
	resp, err := cl.GetTransport().SendRequest(ctx, req)
	if err != nil {
		return nil, transport.NewError(err)
	}
	if resp.Error != nil {
		return nil, &RPCError{Code: resp.Error.Code, Message: resp.Error.Message, Data: rawData(resp.Error.Data)}
	}
	return resp.Result, nil
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
func listToolsRaw(ctx context.Context, cl *client.Client, info mcp.Implementation) ([]Tool, error) {
	var out []Tool
	cursor := ""
	for page := 0; page < 100; page++ {
		var params map[string]any
		if cursor != "" {
			params = map[string]any{"cursor": cursor}
		}
		res, err := rawRequest(ctx, cl, info, string(mcp.MethodToolsList), params)
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
	return Tool{Tool: t, Raw: append(json.RawMessage(nil), raw...), Hash: hex.EncodeToString(sum[:8])}, nil
}
