package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/mcpx-dev/mcpx/fixtures/authserver"
	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
)

func init() {
	register(fixtureCmd{
		name:    "authserver",
		summary: "an OAuth authorization server: registration, PKCE, rotating refresh tokens, injectable failures",
		run:     runAuthServer,
	})
}

func runAuthServer(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("authserver", "[--addr 127.0.0.1:0] [--access-ttl 1h] [--client ID[:SECRET]] [--hold 50ms] [...]")
	addr := fs.String("addr", "127.0.0.1:0", "loopback `address` to listen on (port 0 picks one)")
	ttl := fs.Duration("access-ttl", 0, "access token `lifetime` (default 1h)")
	noPKCE := fs.Bool("no-pkce-methods", false, "omit code_challenge_methods_supported from the metadata")
	noRefreshGrant := fs.Bool("no-refresh-grant", false, "omit refresh_token from grant_types_supported and refuse the grant")
	noRefreshTokens := fs.Bool("no-refresh-tokens", false, "issue no refresh tokens")
	noRegistration := fs.Bool("no-registration", false, "disable dynamic client registration")
	client := fs.String("client", "", "pre-register a client `ID[:SECRET]` (a configured oauth.client_id)")
	hold := fs.Duration("hold", 0, "delay every token response by this `duration`")
	slow := fs.Duration("slow", 0, "`duration` of an injected slow response (default 3s)")
	withMCP := fs.Bool("mcp", false, "also serve an MCP fixture protected by this authorization server (prints mcp: URL)")
	era := fs.String("era", "both", "protocol `era` of the --mcp server: legacy, modern or both")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := mcpserver.CheckLoopback(*addr); err != nil {
		return usageErrorf("authserver: --addr: %v", err)
	}
	s, err := authserver.Start(authserver.Options{
		Addr:                *addr,
		AccessTokenTTL:      *ttl,
		OmitPKCEMethods:     *noPKCE,
		OmitRefreshGrant:    *noRefreshGrant,
		NoRefreshTokens:     *noRefreshTokens,
		DisableRegistration: *noRegistration,
		SlowDelay:           *slow,
	})
	if err != nil {
		return fmt.Errorf("start authorization server fixture: %w", err)
	}
	if *client != "" {
		id, secret, _ := strings.Cut(*client, ":")
		s.AddClient(id, secret, "http://127.0.0.1/callback") // loopback redirect: any port
	}
	s.Hold(*hold)
	if _, err := fmt.Fprintf(stdout, "url: %s\nmetadata: %s/.well-known/oauth-authorization-server\ncontrol: %s/_fixture/\n", s.URL(), s.URL(), s.URL()); err != nil {
		_ = s.Close()
		return fmt.Errorf("print ready lines: %w", err)
	}
	if *withMCP {
		// The protected resource lives in this process so it can check the
		// tokens this authorization server issues.
		e, err := mcpserver.ParseEra(*era)
		if err != nil {
			_ = s.Close()
			return usageErrorf("authserver: --era: %v", err)
		}
		m, err := mcpserver.Start(mcpserver.Options{Era: e, ValidateToken: s.Validate, AuthorizationServers: []string{s.URL()}})
		if err != nil {
			_ = s.Close()
			return fmt.Errorf("start protected MCP fixture: %w", err)
		}
		defer m.Close()
		fmt.Fprintf(stdout, "mcp: %s\nmcp-control: %s\n", m.URL(), m.ControlURL())
	}
	<-ctx.Done()
	if err := s.Close(); err != nil {
		return fmt.Errorf("stop authorization server fixture: %w", err)
	}
	return nil
}
