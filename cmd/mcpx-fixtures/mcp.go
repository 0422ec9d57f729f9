package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
)

func init() {
	register(fixtureCmd{
		name:    "mcp",
		summary: "the fault-injecting MCP server (Streamable HTTP, both protocol eras)",
		run:     runMCP,
	})
}

func runMCP(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("mcp", "[--addr 127.0.0.1:0] [--era legacy|modern|both] [--session-loss 404|400] [--bearer TOKEN]")
	addr := fs.String("addr", "127.0.0.1:0", "loopback `address` to listen on (port 0 picks one)")
	eraFlag := fs.String("era", "both", "protocol `era`s to serve: legacy, modern or both")
	loss := fs.Int("session-loss", http.StatusNotFound, "`status` for an unknown session: 404 (spec) or 400 (TypeScript SDK)")
	bearer := fs.String("bearer", "", "require this bearer `token` on the MCP endpoint")
	authServers := fs.String("auth-server", "", "comma-separated authorization server `URLs` for the protected-resource metadata")
	forgetEvery := fs.Duration("forget-every", 0, "forget every session at this `interval` (0: never)")
	noDelete := fs.Bool("no-delete", false, "answer DELETE with 405 instead of ending the session")
	extraTools := fs.Int("tools", 0, "add this `many` generated tools (tool_00001, ...) to the list")
	directEcho := fs.Int("direct-echo-from", 0, "answer echo calls of at least this many `bytes` without mcp-go (0: never; for benchmarks of large messages)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}

	era, err := mcpserver.ParseEra(*eraFlag)
	if err != nil {
		return usageErrorf("mcp: --era: %v", err)
	}
	if *loss != http.StatusNotFound && *loss != http.StatusBadRequest {
		return usageErrorf("mcp: --session-loss %d: want 404 or 400", *loss)
	}
	if *directEcho < 0 {
		return usageErrorf("mcp: --direct-echo-from %d: want a size in bytes, or 0", *directEcho)
	}
	if err := mcpserver.CheckLoopback(*addr); err != nil {
		return usageErrorf("mcp: --addr: %v", err)
	}
	opts := mcpserver.Options{
		Addr:              *addr,
		Era:               era,
		SessionLossStatus: *loss,
		ForgetEvery:       *forgetEvery,
		BearerToken:       *bearer,
		RefuseDelete:      *noDelete,
		ExtraTools:        *extraTools,
		DirectEchoFrom:    *directEcho,
	}
	if *authServers != "" {
		opts.AuthorizationServers = strings.Split(*authServers, ",")
	}

	s, err := mcpserver.Start(opts)
	if err != nil {
		return fmt.Errorf("start MCP fixture: %w", err)
	}
	if _, err := fmt.Fprintf(stdout, "url: %s\ncontrol: %s\n", s.URL(), s.ControlURL()); err != nil {
		_ = s.Close()
		return fmt.Errorf("print ready lines: %w", err)
	}
	<-ctx.Done()
	if err := s.Close(); err != nil {
		return fmt.Errorf("stop MCP fixture: %w", err)
	}
	return nil
}
