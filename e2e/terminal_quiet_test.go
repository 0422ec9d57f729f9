package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// A command run on a pseudo-terminal with no terminal emulator behind it
// (script, expect, CI wrappers) writes its output and nothing else: no
// query to the terminal (such as the background colour's, ESC ] 11 ; ?)
// that would stall for a reply that never comes and land before the
// output.
func TestTerminalGetsNothingButTheOutput(t *testing.T) {
	e, _ := fixtureEnv(t, mcpserver.EraBoth, "auto")
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()

	// What the terminal shows, as the terminal got it (LF made CRLF).
	onTerminal := func(args ...string) string {
		t.Helper()
		term := startOnTerminal(t, ctx, e, "xterm-256color", args...)
		term.wait()
		out := term.out.String()
		if strings.Contains(out, "\x1b") {
			t.Fatalf("mcpx %s wrote escape sequences to a terminal that asked for none:\n%q", strings.Join(args, " "), out)
		}
		return strings.ReplaceAll(out, "\r\n", "\n")
	}

	// The help: byte for byte what it prints to a pipe.
	piped := e.mustRun("--help")
	if got := onTerminal("--help"); got != piped.stdout+piped.stderr {
		t.Fatalf("the help on a terminal differs from the help to a pipe:\n%q\nwant:\n%q", got, piped.stdout+piped.stderr)
	}

	// A command that asks proxyd: its JSON, from the first byte.
	var st api.Status
	if out := onTerminal("status", "-o", "json"); json.Unmarshal([]byte(out), &st) != nil || len(st.Servers) != 1 {
		t.Fatalf("status -o json on a terminal is not the status alone:\n%q", out)
	}
}
