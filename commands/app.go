package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"

	"github.com/urfave/cli/v2"
)

const appDescription = `mcpx fronts your MCP servers with a local daemon, proxyd, and tells you
the true cause when a connection or a call fails.

Start here:
   mcpx up                           start proxyd in the background
   mcpx servers add docs https://example.com/mcp
   mcpx status                       proxyd and each server's state
   mcpx tools                        every tool, as clients see it (<server>__<tool>)
   mcpx call docs search query=mcp   call a tool and print its result
   mcpx probe https://example.com/mcp   diagnose DNS, TCP, TLS, HTTP, MCP and OAuth
   mcpx login docs                   sign in with OAuth; proxyd keeps tokens fresh
   mcpx activity --fault-domain upstream --since 1h   what failed, and whose fault
   mcpx connect-info                 how to point an MCP client at proxyd

Global flags (--socket, --config, --state-dir, --no-color) may stand before
or after the command. Exit codes are stable: 'mcpx help exit-codes'.`

// Help categories of 'mcpx help'.
const (
	catDaemon   = "Daemon"
	catServers  = "Servers and tools"
	catDiagnose = "Diagnose"
	catSignIn   = "Sign-in"
	catShell    = "Shell"
)

// commands is every top-level command, in help order, with its category:
// the one place a command is registered.
var commands = []struct {
	cmd      *cli.Command
	category string
}{
	{upCommand, catDaemon},
	{downCommand, catDaemon},
	{proxydCommand, catDaemon},
	{statusCommand, catDaemon},
	{reloadCommand, catDaemon},
	{serversCommand, catServers},
	{toolsCommand, catServers},
	{callCommand, catServers},
	{resourcesCommand, catServers},
	{readCommand, catServers},
	{promptsCommand, catServers},
	{promptCommand, catServers},
	{rpcCommand, catServers},
	{skillsCommand, catServers},
	{connectInfoCommand, catServers},
	{stdioCommand, catServers},
	{probeCommand, catDiagnose},
	{topCommand, catDiagnose},
	{activityCommand, catDiagnose},
	{healthCommand, catDiagnose},
	{drillCommand, catDiagnose},
	{loginCommand, catSignIn},
	{logoutCommand, catSignIn},
	{authCommand, catSignIn},
	{completionCommand, catShell},
	{helpCommand, catShell},
}

// New builds the command tree. Tests run it in-process.
func New(stdout, stderr io.Writer) *cli.App {
	var cmds []*cli.Command
	for _, c := range commands {
		cc := cloneCommand(c.cmd)
		cc.Category = c.category
		cmds = append(cmds, cc)
	}
	app := &cli.App{
		Name:        "mcpx",
		Usage:       "ops and diagnostics for MCP connections",
		Description: appDescription,
		Version:     Version,
		// The help command is ours (help topics), so urfave/cli adds no
		// --help flag of its own at the top.
		Flags:                  append(slices.Clip(globalFlags), cli.HelpFlag, cli.VersionFlag),
		Commands:               cmds,
		EnableBashCompletion:   true,
		UseShortOptionHandling: false,
		Writer:                 stdout,
		ErrWriter:              stderr,
		HideHelpCommand:        false,
		ExitErrHandler:         func(*cli.Context, error) {}, // main prints once and exits
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return exitErr(ExitUsage, explainFlagValue(err, c.App.Flags))
		},
	}
	for _, c := range cmds {
		propagateUsageErrors(c)
		// Global flags are accepted after the command too: normalizeArgs
		// moves them, and each command also knows them for its own help.
	}
	return app
}

// cloneCommand copies a command tree: urfave/cli adds help commands and
// flags to the values it runs, so each App gets its own.
func cloneCommand(c *cli.Command) *cli.Command {
	cp := *c
	cp.Flags = append([]cli.Flag(nil), c.Flags...)
	cp.Subcommands = nil
	// 'mcpx help COMMAND' and --help serve; a 'help' subcommand under
	// every group would only clutter help and completion.
	cp.HideHelpCommand = true
	for _, s := range c.Subcommands {
		cp.Subcommands = append(cp.Subcommands, cloneCommand(s))
	}
	return &cp
}

func propagateUsageErrors(c *cli.Command) {
	c.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
		return exitErr(ExitUsage, explainFlagValue(err, c.Flags))
	}
	for _, s := range c.Subcommands {
		propagateUsageErrors(s)
	}
}

// Main runs mcpx with os.Args and returns the process exit code.
func Main() int {
	app := New(os.Stdout, os.Stderr)
	if completeFlagValue(os.Stdout, os.Args) {
		return ExitOK
	}
	args, err := preflight(app, os.Args)
	if errors.Is(err, errHelpShown) {
		return ExitOK
	}
	if err == nil {
		err = app.RunContext(context.Background(), normalizeArgs(app, args))
	}
	if err != nil && !IsSilent(err) {
		fmt.Fprintf(os.Stderr, "mcpx: %s\n", shown(err.Error()))
	}
	return ExitCode(err)
}

// flagValueErr is how the flag package words a value it cannot parse.
var flagValueErr = regexp.MustCompile(`^invalid value "(.*)" for flag -(\S+): (.*)$`)

// explainFlagValue rewrites the flag package's 'invalid value "abc" for
// flag -timeout: parse error' as the flag is written and with the form
// its value takes, by the flag's type among flags; other errors pass as
// they are.
func explainFlagValue(err error, flags []cli.Flag) error {
	m := flagValueErr.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	value, name, why := m[1], m[2], m[3]
	switch lookupFlag(flags, name).(type) {
	case *cli.DurationFlag:
		if _, aerr := strconv.Atoi(value); aerr == nil {
			// A bare number where a duration goes: the unit is missing.
			return fmt.Errorf("--%s %s: a duration needs its unit (%ss, or e.g. 2m)", name, value, value)
		}
		return fmt.Errorf("--%s: %q is not a duration; give one such as 10s, 1m30s or 2h", name, value)
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
		return fmt.Errorf("--%s: %q is not a whole number", name, value)
	}
	return fmt.Errorf("--%s: %q is not a valid value (%s)", name, value, why)
}
