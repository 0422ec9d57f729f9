package main

import (
	"context"
	"fmt"
	"io"

	"github.com/mcpx-dev/mcpx/fixtures/conformance"
	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
)

func init() {
	register(fixtureCmd{
		name:    "conformance",
		summary: "the reference server of the MCP conformance suite's server scenarios",
		run:     runConformance,
	})
}

func runConformance(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("conformance", "[--addr 127.0.0.1:0] [--era legacy|modern|both]")
	addr := fs.String("addr", "127.0.0.1:0", "loopback `address` to listen on (port 0 picks one)")
	eraFlag := fs.String("era", "both", "protocol `era`s to serve: legacy, modern or both")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	era, err := mcpserver.ParseEra(*eraFlag)
	if err != nil {
		return usageErrorf("conformance: --era: %v", err)
	}
	if err := mcpserver.CheckLoopback(*addr); err != nil {
		return usageErrorf("conformance: --addr: %v", err)
	}
	s, err := conformance.Start(conformance.Options{Addr: *addr, Era: era})
	if err != nil {
		return fmt.Errorf("start conformance fixture: %w", err)
	}
	if _, err := fmt.Fprintf(stdout, "url: %s\n", s.URL()); err != nil {
		_ = s.Close()
		return fmt.Errorf("print ready lines: %w", err)
	}
	<-ctx.Done()
	if err := s.Close(); err != nil {
		return fmt.Errorf("stop conformance fixture: %w", err)
	}
	return nil
}
