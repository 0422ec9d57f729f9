package api

import (
	"context"
	"encoding/json"
	"net/http"
)

// Resource is one upstream resource, or resource template, as proxyd
// lists it.
type Resource struct {
	Server      string `json:"server"`
	URI         string `json:"uri,omitempty"`
	URITemplate string `json:"uri_template,omitempty"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mime_type,omitempty"`
	Size        int64  `json:"size,omitempty"`
	LeftOut     string `json:"left_out,omitempty"` // why clients do not see the resource, when they do not
}

// Prompt is one upstream prompt as proxyd exposes it.
type Prompt struct {
	Server      string           `json:"server"`
	Name        string           `json:"name"`         // the upstream's own name
	Exposed     string           `json:"exposed_name"` // the name clients see
	Title       string           `json:"title,omitempty"`
	Description string           `json:"description,omitempty"`
	Arguments   []PromptArgument `json:"arguments,omitempty"`
	LeftOut     string           `json:"left_out,omitempty"` // why clients do not see the prompt, when they do not
}

// PromptArgument is one argument of a prompt.
type PromptArgument struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required"`
}

// RPCRequest is POST /v1/rpc: one MCP request of any method to Server,
// through proxyd's connection, classified and recorded like a tool call.
type RPCRequest struct {
	Server string `json:"server,omitempty"`
	// Target, instead of Server, is a server outside the configuration:
	// proxyd connects for this request only and records it as an ad-hoc
	// server.
	Target    *AdHocTarget    `json:"target,omitempty"`
	Method    string          `json:"method"`
	Params    json.RawMessage `json:"params,omitempty"`
	TimeoutMS int64           `json:"timeout_ms,omitempty"`
}

// AdHocTarget is a one-shot server: a URL, or a stdio command line.
type AdHocTarget struct {
	URL     string   `json:"url,omitempty"`
	Command []string `json:"command,omitempty"`
}

// RPCResponse carries the upstream's result as it came, or the failure
// classified by the call-error taxonomy.
type RPCResponse struct {
	RequestID  string          `json:"request_id"`
	Server     string          `json:"server"`
	Method     string          `json:"method"`
	DurationMS float64         `json:"duration_ms"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      *CallError      `json:"error,omitempty"`
}

// Resources is GET /v1/resources: every server's resources and templates,
// or one server's.
func (c *Client) Resources(ctx context.Context, server string) ([]Resource, error) {
	var out []Resource
	return out, c.do(ctx, http.MethodGet, withServer("/v1/resources", server), nil, &out)
}

// Prompts is GET /v1/prompts: every server's prompts, or one server's.
func (c *Client) Prompts(ctx context.Context, server string) ([]Prompt, error) {
	var out []Prompt
	return out, c.do(ctx, http.MethodGet, withServer("/v1/prompts", server), nil, &out)
}

// RPC is POST /v1/rpc.
func (c *Client) RPC(ctx context.Context, req RPCRequest) (*RPCResponse, error) {
	var r RPCResponse
	return &r, c.do(ctx, http.MethodPost, "/v1/rpc", req, &r)
}
