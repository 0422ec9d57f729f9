package commands

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/editdistance"
	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// describeServer is 'mcpx status SERVER': one server in full.
func describeServer(c *cli.Context, st *api.Status, name string) error {
	var s *api.ServerStatus
	var names []string
	for i := range st.Servers {
		names = append(names, st.Servers[i].Name)
		if st.Servers[i].Name == name {
			s = &st.Servers[i]
		}
	}
	if s == nil {
		return exitErr(ExitNotFound, fmt.Errorf("no server named %q%s (see 'mcpx servers')", name, editdistance.DidYouMean(name, names)))
	}
	err := render(c, s, func(w io.Writer) error { return printServer(w, s) })
	if err != nil {
		return err
	}
	if s.State == api.StateError {
		return silentExit(ExitUnavailable)
	}
	return nil
}

func printServer(w io.Writer, s *api.ServerStatus) error {
	row := func(k, v string) { fmt.Fprintf(w, "%-13s %s\n", k+":", v) }
	row("server", s.Name)
	row("state", fmt.Sprintf("%s since %s (%s ago)", s.State, tableTime(s.Since), humanDuration(time.Since(s.Since))))
	if s.Summary != "" {
		row("summary", redact.Control(s.Summary))
	}
	row("transport", s.Transport)
	row("target", redact.Control(s.Target))
	era := s.Protocol
	if s.Era != "" {
		era += ", era " + s.Era
	}
	if s.ProtocolVersion != "" {
		era += ", " + s.ProtocolVersion
	}
	row("protocol", era)
	if s.ServerName != "" {
		row("server info", redact.Control(strings.TrimSpace(s.ServerName+" "+s.ServerVersion)))
	}
	row("session", dash(s.SessionID))
	row("offers", fmt.Sprintf("%d tools, %d prompts, %d resources", s.Tools, s.Prompts, s.Resources))
	row("reinits", fmt.Sprint(s.Reinits))
	if s.Attempts > 0 || s.NextRetry != nil {
		retry := plural(s.Attempts, "attempt")
		if s.NextRetry != nil {
			retry += fmt.Sprintf("; next retry at %s (in %s)", tableTime(*s.NextRetry), humanDuration(time.Until(*s.NextRetry)))
		}
		row("connecting", retry)
	}
	if h := s.Health; h != nil {
		line := fmt.Sprintf("%s in 5 min, %d failed", plural(h.Calls, "call"), h.Failed)
		if h.DominantClass != "" {
			line += ", mostly " + h.DominantClass
		}
		row("health", line)
	}
	if s.LastError != "" {
		row("cause", fitCause(s.LastError, 100))
		fmt.Fprintln(w, "last error:")
		for _, l := range strings.Split(redact.Control(dedupeChain(s.LastError)), "\n") {
			fmt.Fprintln(w, "  "+l)
		}
	}
	for _, warn := range s.Warnings {
		row("warning", redact.Control(warn))
	}
	row("next", nextStep(s))
	return nil
}

// needsSignIn: the server's connection was refused for want of a sign-in.
func needsSignIn(s *api.ServerStatus) bool {
	return strings.Contains(s.LastError, "requires sign-in") || strings.Contains(s.LastError, "mcpx login")
}

// signInStep is what to run for a server that wants a sign-in: OAuth's,
// or a static token's.
func signInStep(server string) string {
	return "mcpx login " + server + " (or, for a static token: mcpx auth set-token " + server + ")"
}

// nextStep is the command to run next for a server in its state.
func nextStep(s *api.ServerStatus) string {
	switch {
	case needsSignIn(s):
		return signInStep(s.Name)
	case s.State == api.StateError && s.Transport == "stdio":
		return "check the command (run it by hand: it must speak MCP on stdout), then 'mcpx reload'"
	case s.State == api.StateError:
		return "mcpx probe " + s.Name
	case s.State == api.StateDegraded:
		return "mcpx activity --server " + s.Name + " --since 15m"
	case s.State == api.StateDisabled:
		return "set disabled: false for " + s.Name + " in the config"
	case s.State == api.StateConnecting && s.Transport == "stdio":
		return "wait (a stdio child must answer initialize on stdout), or run its command by hand"
	case s.State == api.StateConnecting:
		return "wait, or: mcpx probe " + s.Name
	}
	return "mcpx tools " + s.Name
}

// plural is "1 call", "2 calls".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
