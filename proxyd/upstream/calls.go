package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/mcpx-dev/mcpx/proxyd/relay"

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

// NewCallResult wraps a tools/call result as it came; isError is read
// from its top level without decoding the rest. An isError present twice
// or under another case is read as the MCP library reads it, so the
// record says what the client sees.
func NewCallResult(raw json.RawMessage) *CallResult { return ListedCallResult(raw, nil) }

// ListedCallResult is NewCallResult, reading isError from ms when it
// lists raw's members (see relay.Members).
func ListedCallResult(raw json.RawMessage, ms *relay.Members) *CallResult {
	var v [1][]byte
	if ms.Fields(raw, isErrorKey, v[:]) {
		return &CallResult{Raw: raw, IsError: string(v[0]) == "true"}
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	_ = json.Unmarshal(raw, &r)
	return &CallResult{Raw: raw, IsError: r.IsError}
}

var isErrorKey = []string{"isError"}

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
	params, err := CallParams(name, args)
	if err != nil {
		return nil, err
	}
	raw, err := c.Relay(ctx, &Exchange{Method: string(mcp.MethodToolsCall), Name: name, Params: params})
	if err != nil {
		return nil, err
	}
	return NewCallResult(raw), nil
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
		//lint:ignore SA1019 ping is the legacy era's liveness check; on a modern connection it sends nothing
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
	c.setToolsLocked(tools)
	c.mu.Unlock()
	if changed {
		c.opts.changed(c.name)
	}
	return tools, nil
}

// WantLevel makes a legacy upstream send log messages at level or above:
// its session has one level for all of proxyd's clients, so it gets the
// most verbose level any client asked for, and each client's messages are
// filtered to its own. Modern upstreams take the level with each request.
func (c *Conn) WantLevel(ctx context.Context, level string) {
	rank := relay.LogLevelRank(level)
	if rank < 0 {
		return
	}
	c.mu.Lock()
	if cur := relay.LogLevelRank(c.level); cur >= 0 && cur <= rank {
		c.mu.Unlock()
		return
	}
	c.level = level
	c.mu.Unlock()
	c.applyLevel(ctx)
}

// applyLevel sends the wanted level to a legacy upstream that logs (after
// a change, a connect or a re-established session).
func (c *Conn) applyLevel(ctx context.Context) {
	c.mu.RLock()
	level, era, logs := c.level, c.era, c.caps.Logging != nil
	c.mu.RUnlock()
	if level == "" || era != EraLegacy || !logs {
		return
	}
	params, _ := json.Marshal(map[string]string{"level": level})
	err := c.withSession(ctx, nil, func(ctx context.Context, cl *client.Client) error {
		c.mu.RLock()
		w := c.wire
		c.mu.RUnlock()
		_, err := rawRequest(ctx, cl, w, string(mcp.MethodSetLogLevel), "", nil, params)
		return err
	})
	if err != nil {
		c.opts.logger().Warn("setting the upstream's log level", "server", c.name, "level", level, "err", err)
	}
}

// RootsChanged tells a legacy upstream that the roots of a client it asked
// for them have changed (notifications/roots/list_changed), so it may ask
// again. A modern upstream has no session to tell: it gets the client's
// roots with each request that needs them.
func (c *Conn) RootsChanged(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	if c.Modern() {
		return nil
	}
	if err := cl.RootListChanges(ctx); err != nil {
		return fmt.Errorf("telling %s the roots changed: %w", c.name, err)
	}
	return nil
}
