package commands

import (
	"context"
	"fmt"
	"io"
	"os"

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
or after the command. Exit codes are stable: see the README.`

// commandList is every top-level command, in help order.
func commandList() []*cli.Command {
	return []*cli.Command{
		upCommand,
		downCommand,
		proxydCommand,
		statusCommand,
		serversCommand,
		toolsCommand,
		callCommand,
		reloadCommand,
		connectInfoCommand,
		stdioCommand,
		activityCommand,
		healthCommand,
		completionCommand,
	}
}

// categories group the commands in 'mcpx help'.
var categories = map[string]string{
	"up": "Daemon", "down": "Daemon", "proxyd": "Daemon", "status": "Daemon", "reload": "Daemon",
	"servers": "Servers and tools", "tools": "Servers and tools", "call": "Servers and tools",
	"connect-info": "Servers and tools", "stdio": "Servers and tools",
	"probe": "Diagnose", "top": "Diagnose", "activity": "Diagnose", "health": "Diagnose", "drill": "Diagnose",
	"login": "Sign-in", "logout": "Sign-in", "auth": "Sign-in",
	"completion": "Shell",
}

// extraCommands are registered by other files of the package (probe,
// login, drills) through their init functions.
var extraCommands []*cli.Command

// New builds the command tree. Tests run it in-process.
func New(stdout, stderr io.Writer) *cli.App {
	var cmds []*cli.Command
	for _, c := range append(commandList(), extraCommands...) {
		cc := cloneCommand(c)
		cc.Category = categories[cc.Name]
		cmds = append(cmds, cc)
	}
	app := &cli.App{
		Name:                   "mcpx",
		Usage:                  "ops and diagnostics for MCP connections",
		Description:            appDescription,
		Version:                Version,
		Flags:                  globalFlags,
		Commands:               cmds,
		EnableBashCompletion:   true,
		UseShortOptionHandling: false,
		Writer:                 stdout,
		ErrWriter:              stderr,
		HideHelpCommand:        false,
		ExitErrHandler:         func(*cli.Context, error) {}, // main prints once and exits
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return exitErr(ExitUsage, err)
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
	for _, s := range c.Subcommands {
		cp.Subcommands = append(cp.Subcommands, cloneCommand(s))
	}
	return &cp
}

func propagateUsageErrors(c *cli.Command) {
	c.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return exitErr(ExitUsage, err) }
	for _, s := range c.Subcommands {
		propagateUsageErrors(s)
	}
}

// Main runs mcpx with os.Args and returns the process exit code.
func Main() int {
	app := New(os.Stdout, os.Stderr)
	err := app.RunContext(context.Background(), normalizeArgs(app, os.Args))
	if err != nil && !IsSilent(err) {
		fmt.Fprintf(os.Stderr, "mcpx: %v\n", err)
	}
	return ExitCode(err)
}
