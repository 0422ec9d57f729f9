package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// endpoint is proxyd's downstream MCP endpoint, as `mcpx connect-info`
// prints it for MCP clients.
type endpoint struct {
	URL    string `json:"url"`
	Header string `json:"header"`
}

func (m *mcpx) endpoint() (*endpoint, error) {
	out, err := m.runQuiet("connect-info", "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("mcpx connect-info: %w", err)
	}
	var ep endpoint
	if err := json.Unmarshal([]byte(out), &ep); err != nil || ep.URL == "" {
		return nil, fmt.Errorf("decoding mcpx connect-info output: %v", err)
	}
	return &ep, nil
}

// readAndPrompt reads the first resource and gets the first prompt
// through proxyd, as an MCP client of proxyd would.
func (ep *endpoint) readAndPrompt() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name, value, _ := strings.Cut(ep.Header, ": ")
	c, err := client.NewStreamableHttpClient(ep.URL, transport.WithHTTPHeaders(map[string]string{name: value}))
	if err != nil {
		return fmt.Errorf("MCP client for proxyd: %w", err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("connecting to proxyd: %w", err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: "mcpx-client", Version: "1"},
	}}); err != nil {
		return fmt.Errorf("initialize with proxyd: %w", err)
	}
	rs, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil {
		return fmt.Errorf("resources/list through proxyd: %w", err)
	}
	if len(rs.Resources) > 0 {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = rs.Resources[0].URI
		if _, err := c.ReadResource(ctx, req); err != nil {
			return fmt.Errorf("resources/read through proxyd: %w", err)
		}
	}
	ps, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{})
	if err != nil {
		return fmt.Errorf("prompts/list through proxyd: %w", err)
	}
	if len(ps.Prompts) > 0 {
		req := mcp.GetPromptRequest{}
		req.Params.Name = ps.Prompts[0].Name
		if _, err := c.GetPrompt(ctx, req); err != nil {
			return fmt.Errorf("prompts/get through proxyd: %w", err)
		}
	}
	return nil
}
