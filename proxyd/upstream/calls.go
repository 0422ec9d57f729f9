package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// CallResult is a tools/call answered by the upstream (which may itself
// report isError). The result is kept as it came; the typed form is
// decoded only when someone needs it (the fast path never does).
type CallResult struct {
	Raw     json.RawMessage
	IsError bool

	once  sync.Once
	typed *mcp.CallToolResult
	err   error
}

// Typed decodes the result for the MCP library.
func (r *CallResult) Typed() (*mcp.CallToolResult, error) {
	r.once.Do(func() {
		r.typed, r.err = mcp.ParseCallToolResult(&r.Raw)
		if r.err != nil {
			r.err = fmt.Errorf("decoding tools/call result: %w", r.err)
		}
	})
	return r.typed, r.err
}

// CallTool calls a tool with args (a JSON object or nil) for a caller
// that takes no notifications or requests of the upstream (drills).
func (c *Conn) CallTool(ctx context.Context, name string, args json.RawMessage) (*CallResult, error) {
	params, err := callParams(name, args)
	if err != nil {
		return nil, err
	}
	raw, err := c.Relay(ctx, &Exchange{Method: string(mcp.MethodToolsCall), Name: name, Params: params})
	if err != nil {
		return nil, err
	}
	// One cheap pass: the result must be an object, and isError decides
	// the classification.
	var head struct {
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("decoding tools/call result: %w", err)
	}
	return &CallResult{Raw: raw, IsError: head.IsError}, nil
}

// GetPrompt forwards prompts/get (retried once after a re-established session).
func (c *Conn) GetPrompt(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	var res *mcp.GetPromptResult
	err := c.withSession(ctx, nil, func(ctx context.Context, cl *client.Client) error {
		var err error
		res, err = cl.GetPrompt(ctx, req)
		return err
	})
	return res, err
}

// ReadResource forwards resources/read (retried once after a re-established session).
func (c *Conn) ReadResource(ctx context.Context, req mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	var res *mcp.ReadResourceResult
	err := c.withSession(ctx, nil, func(ctx context.Context, cl *client.Client) error {
		var err error
		res, err = cl.ReadResource(ctx, req)
		return err
	})
	return res, err
}

// Ping sends ping (retried once after a re-established session).
func (c *Conn) Ping(ctx context.Context) error {
	return c.withSession(ctx, nil, func(ctx context.Context, cl *client.Client) error {
		return cl.Ping(ctx)
	})
}

// ListTools lists the server's tools now (retried once after a
// re-established session) and makes the result the tool baseline.
func (c *Conn) ListTools(ctx context.Context) ([]Tool, error) {
	var tools []Tool
	err := c.withSession(ctx, nil, func(ctx context.Context, cl *client.Client) error {
		c.mu.RLock()
		w := c.wire
		c.mu.RUnlock()
		var err error
		tools, err = listToolsRaw(ctx, cl, w)
		return err
	})
	if err != nil {
		return nil, err
	}
	tools = c.usable(tools)
	c.mu.Lock()
	changed := !sameTools(c.tools, tools)
	c.tools = tools
	c.mu.Unlock()
	if changed {
		c.opts.changed(c.name)
	}
	return tools, nil
}
