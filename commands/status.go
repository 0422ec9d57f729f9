package commands

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

var statusCommand = &cli.Command{
	Name:      "status",
	Aliases:   []string{"describe"},
	Usage:     "show proxyd and the state of each upstream server, or one server in full",
	ArgsUsage: "[SERVER]",
	Description: `Shows the daemon (version, uptime, socket, MCP endpoint) and, per server,
its state (connecting, ready, degraded, error, disabled), protocol era,
tool count and the cause of its last error. When proxyd is not running it
says so, lists the configured servers, and exits 3; with -o json or yaml
it still prints a status, "running": false and each configured server in
state unknown, so a script reads a document rather than nothing.

With SERVER (or as 'mcpx describe SERVER'), shows that server in full:
state and since when (in error: since the first failed attempt), the
whole last error (a stdio server's last stderr lines included), next
retry, session, era, counters, health, and the command to run next. Exits 9 when the server is in state error, 8 when
there is no such server.

Examples:
   mcpx status
   mcpx status docs
   mcpx status -o json | jq '.servers[] | select(.state != "ready")'`,
	Flags:        []cli.Flag{outputFlag},
	BashComplete: completeServers,
	Action:       runStatus,
}

func runStatus(c *cli.Context) error {
	if _, err := format(c); err != nil {
		return err
	}
	if c.NArg() > 1 {
		return usageErr("status takes at most one SERVER")
	}
	st, err := newClient(c).Status(c.Context)
	if err != nil {
		if api.IsNotRunning(err) {
			return statusNotRunning(c, err)
		}
		return daemonErr(err)
	}
	st.Running = true // it answered (a proxyd older than the field sends none)
	if c.IsSet("config") {
		warnOtherConfig(c, st)
	}
	if name := c.Args().First(); name != "" {
		return describeServer(c, st, name)
	}
	return render(c, st, func(w io.Writer) error {
		stopping := ""
		if st.Stopping {
			stopping = "; stopping (draining calls, refusing new ones)"
		}
		fmt.Fprintf(w, "proxyd %s (pid %d), up %s%s\n", st.Version, st.PID, humanDuration(time.Duration(st.UptimeSeconds*float64(time.Second))), stopping)
		fmt.Fprintf(w, "  socket:       %s\n  MCP endpoint: %s\n  config:       %s\n", st.Socket, st.MCPURL, st.ConfigPath)
		if strings.HasPrefix(st.StateDB, "postgres:") {
			fmt.Fprintf(w, "  state:        %s (replica %s)\n", st.StateDB, st.Replica)
		}
		if st.ConfigError != "" {
			fmt.Fprintf(w, "  config error: %s (running configuration kept)\n", st.ConfigError)
		}
		fmt.Fprintln(w)
		if len(st.Servers) == 0 {
			emptyNote(w, "No servers configured. Add one with: mcpx servers add NAME URL")
			return nil
		}
		if err := serverTable(w, st.Servers); err != nil {
			return err
		}
		for _, s := range st.Servers {
			for _, warn := range s.Warnings {
				fmt.Fprintf(w, "warning: %s: %s\n", s.Name, redact.Control(warn))
			}
		}
		return nil
	})
}

func serverTable(w io.Writer, servers []api.ServerStatus) error {
	t := newTable(w, "SERVER", "STATE", "TRANSPORT", "ERA", "TOOLS", "DETAIL")
	for _, s := range servers {
		detail := s.Summary
		if detail == "" && s.LastError != "" {
			detail = t.Fit(s.LastError, 60, fitCause)
			if s.NextRetry != nil {
				detail += fmt.Sprintf(" (retry in %s)", humanDuration(time.Until(*s.NextRetry)))
			}
			switch {
			case strings.Contains(s.LastError, "requires sign-in"):
				detail += " — run: " + signInStep(s.Name)
			case s.State == api.StateError && s.Transport != "stdio":
				detail += " — diagnose: mcpx probe " + s.Name
			}
		}
		if detail == "" && s.ServerName != "" {
			detail = strings.TrimSpace(s.ServerName + " " + s.ServerVersion)
		}
		era := s.Era
		if era == "" {
			era = "-"
		}
		_ = t.Append([]string{s.Name, string(s.State), s.Transport, era, fmt.Sprint(s.Tools), redact.Control(detail)})
	}
	return t.Render()
}

// statusNotRunning says what is known locally when proxyd is down, and
// exits 3. A table names the configured servers on stderr; JSON and YAML
// print a status with "running": false and the configured servers (state
// unknown) on stdout, so a script reading it gets a document rather than
// nothing.
func statusNotRunning(c *cli.Context, down error) error {
	st := api.Status{Socket: socketPath(c), ConfigPath: configPath(c), StateDir: stateDir(c), Servers: []api.ServerStatus{}}
	cfg, err := config.Load(st.ConfigPath)
	if err != nil {
		// 'mcpx up' would fail on it: the fix comes first.
		errorf(c, "%v\n", err)
		st.ConfigError = redact.Control(redact.Text(err.Error()))
		down = fmt.Errorf("proxyd is not running (no socket at %s), and its config file has the error above: fix it, then start proxyd with 'mcpx up'", st.Socket)
	} else {
		st.Servers = proxyd.ConfiguredServers(cfg)
	}
	if f, _ := format(c); f == "table" {
		if len(st.Servers) > 0 {
			names := make([]string, 0, len(st.Servers))
			for _, s := range st.Servers {
				names = append(names, s.Name)
			}
			errorf(c, "configured servers (not connected): %s\n", strings.Join(names, ", "))
		}
		return exitErr(ExitProxydNotRunning, down)
	}
	var doc any = st
	if name := c.Args().First(); name != "" {
		i := slices.IndexFunc(st.Servers, func(s api.ServerStatus) bool { return s.Name == name })
		if i < 0 {
			return exitErr(ExitProxydNotRunning, down) // nothing to print of a server not configured
		}
		doc = st.Servers[i]
	}
	if err := render(c, doc, nil); err != nil {
		return err
	}
	return exitErr(ExitProxydNotRunning, down)
}

func humanDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// oneLine flattens and shortens server-supplied text for a table cell:
// at a word, unless that would drop more than half the cell.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(redact.Control(s)), " ")
	if len(s) <= max {
		return s
	}
	cut := cutAt(s, max-1)
	if i := strings.LastIndexByte(cut, ' '); s[len(cut)] != ' ' && i > len(cut)/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ") + "…"
}

// cutAt is s cut to at most n bytes, never inside a character.
func cutAt(s string, n int) string {
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
