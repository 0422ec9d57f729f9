// Command mcpx-fixtures serves the misbehaving loopback servers of
// fixtures/ for smoke scripts, demos and anyone reproducing a failure.
// See "mcpx-fixtures help".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "mcpx-fixtures: %v\n", err)
		os.Exit(exitCode(err))
	}
}

// fixtureCmd is one subcommand. run serves until ctx is done; it prints its
// "key: value" ready lines on stdout and nothing else there.
type fixtureCmd struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout io.Writer) error
}

// registry holds the subcommands; each file of this directory registers its
// own in init.
var registry = map[string]fixtureCmd{}

func register(c fixtureCmd) {
	if _, dup := registry[c.name]; dup {
		panic("mcpx-fixtures: subcommand registered twice: " + c.name)
	}
	registry[c.name] = c
}

// errUsage marks command-line mistakes (exit code 2).
var errUsage = errors.New("usage")

func usageErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

func exitCode(err error) int {
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

// usageOutput receives flag usage text; run points it at its stderr.
var usageOutput io.Writer = os.Stderr

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	usageOutput = stderr
	if len(args) == 0 {
		printHelp(stderr)
		return usageErrorf("no subcommand given")
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		printHelp(stdout)
		return nil
	}
	c, ok := registry[args[0]]
	if !ok {
		return usageErrorf("unknown subcommand %q (see \"mcpx-fixtures help\")", args[0])
	}
	err := c.run(ctx, args[1:], stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "mcpx-fixtures serves loopback servers that misbehave on purpose.")
	fmt.Fprintln(w, "\nUsage: mcpx-fixtures SUBCOMMAND [flags]   (SUBCOMMAND -h for its flags)")
	fmt.Fprintln(w, "\nSubcommands:")
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, registry[n].summary)
	}
	fmt.Fprintln(w, "  help         show this list")
	fmt.Fprintln(w, "\nEach subcommand prints \"key: value\" lines (url first) on stdout when ready")
	fmt.Fprintln(w, "and serves until interrupted (SIGINT or SIGTERM).")
}

// newFlagSet returns a flag set whose errors come back to the caller;
// usage text goes to stderr.
func newFlagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(usageOutput)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: mcpx-fixtures %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and refuses stray positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %s: %w", errUsage, fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return usageErrorf("%s: unexpected arguments: %s", fs.Name(), strings.Join(fs.Args(), " "))
	}
	return nil
}
