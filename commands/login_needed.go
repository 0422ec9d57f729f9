package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/probe"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// noSignInNeeded answers 'mcpx login SERVER' for a server that takes no
// sign-in: when proxyd holds no grant for it and a probe through proxyd
// completes the MCP handshake without one, there is nothing to sign in to
// (--force signs in all the same). done is false when the sign-in should
// go ahead.
func noSignInNeeded(c *cli.Context, server string) (done bool, err error) {
	if c.Bool("force") {
		return false, nil
	}
	cl := newClient(c)
	st, err := cl.AuthStatus(c.Context, server)
	if err != nil || len(st) != 1 || st[0].SignedIn {
		return false, nil // the sign-in reports its own errors
	}
	ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
	defer cancel()
	rep, err := cl.Probe(ctx, api.ProbeRequest{Server: server, TimeoutMS: 5000, OverallMS: 8000})
	if err != nil || rep.Result.Code != probe.CodeOK {
		return false, nil
	}
	msg := fmt.Sprintf("no sign-in needed: %s answers MCP without one (probe: %s); 'mcpx login %s --force' signs in anyway", server, rep.Result.Code, server)
	if f, _ := format(c); f != "table" {
		// A document for a script; the words for the person.
		errorf(c, "%s\n", msg)
		return true, render(c, api.LoginResult{Server: server, Scopes: []string{}, Warnings: []string{}, NotNeeded: true}, nil)
	}
	fmt.Fprintln(c.App.Writer, msg)
	return true, nil
}

// signInNote is auth status's note for a server without a grant: a sign-in
// where its connection was refused for want of one, "no sign-in needed"
// where it connected without one, else nothing.
func signInNote(server string, states map[string]api.ServerStatus) string {
	s, ok := states[server]
	switch {
	case !ok:
		return ""
	case s.State == api.StateReady || s.State == api.StateDegraded:
		return "no sign-in needed"
	case needsSignIn(&s):
		return "mcpx login " + server
	}
	return ""
}
