package commands

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/editdistance"
)

// preflight reads the command line against the command tree before
// urfave/cli does, for what it does not do: --help or -h anywhere on the
// line (also after arguments) shows the help of the command named so far;
// an unknown command, subcommand or flag is a usage error that names it as
// typed and suggests the nearest one. It returns the arguments to run.
func preflight(app *cli.App, args []string) ([]string, error) {
	if len(args) < 2 || args[len(args)-1] == "--generate-bash-completion" {
		return args, nil
	}
	// 'help COMMAND...' is 'COMMAND... --help'; 'help TOPIC' is the help
	// command's own.
	globals, rest := extractFlags(args[1:], app.Flags, false)
	if len(rest) > 0 && (rest[0] == "help" || rest[0] == "h") && !(len(rest) > 1 && slices.Contains(helpTopics, rest[1])) {
		out := append(append([]string{args[0]}, globals...), rest[1:]...)
		return preflight(app, append(out, "--help"))
	}
	var path []*cli.Command
	cmds := app.Commands
	help, positional := false, false
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if len(path) > 0 && path[0].Name == "help" {
			return args, nil // help TOPIC: the help command reads it
		}
		if a == "-h" || a == "--help" {
			help = true
			continue
		}
		if strings.HasPrefix(a, "-") && a != "-" && !isNumber(a) {
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			flags := app.Flags
			if len(path) > 0 {
				flags = append(slices.Clip(flags), path[len(path)-1].Flags...)
			}
			f := lookupFlag(flags, name)
			if f == nil {
				return nil, unknownFlag(a, name, flags, path)
			}
			if !hasValue && takesValue(f) {
				i++
			}
			continue
		}
		if !positional && (len(path) == 0 || len(path[len(path)-1].Subcommands) > 0) {
			if c := findCommand(cmds, a); c != nil {
				path = append(path, c)
				cmds = c.Subcommands
				continue
			}
			if len(path) == 0 || path[len(path)-1].ArgsUsage == "" {
				return nil, unknownCommand(a, cmds, path)
			}
		}
		if last := len(path) - 1; last >= 0 && len(path[last].Subcommands) == 0 && path[last].ArgsUsage == "" && !helpAsked(args[i:]) {
			// A command that takes no arguments would ignore this one.
			return nil, usageErr("'%s' takes no arguments (got %q; see '%s --help')", commandLine(path), a, commandLine(path))
		}
		positional = true
	}
	// call and tools take a stdio command after '--'.
	if len(path) > 0 && takesStdioCommand[path[0].Name] && !help {
		if i := slices.Index(args, "--"); i > 0 {
			if i == len(args)-1 {
				return nil, usageErr("'--' must be followed by a stdio server's COMMAND [ARGS...]")
			}
			if app.Metadata == nil {
				app.Metadata = map[string]any{}
			}
			app.Metadata[stdioCommandKey] = slices.Clone(args[i+1:])
			return args[:i:i], nil
		}
	}
	if !help {
		return args, nil
	}
	// urfave/cli shows the parent's help for a subcommand's --help, and
	// for a command with subcommands neither its subcommands nor its
	// flags: print the command's own, with both.
	if last := len(path) - 1; last >= 1 && len(path[last].Subcommands) == 0 || last >= 0 && len(path[last].Subcommands) > 0 {
		cp := *path[last]
		cp.HelpName = commandLine(path)
		cp.Flags = append(slices.Clip(cp.Flags), cli.HelpFlag)
		tmpl := cli.CommandHelpTemplate
		if len(cp.Subcommands) > 0 {
			tmpl = subcommandHelpTemplate
		}
		cli.HelpPrinter(app.Writer, tmpl, &cp)
		return nil, errHelpShown
	}
	globals, _ = extractFlags(args[1:], app.Flags, false)
	out := []string{args[0]}
	for _, g := range globals {
		if g != "-h" && g != "--help" {
			out = append(out, g)
		}
	}
	for _, c := range path {
		out = append(out, c.Name)
	}
	return append(out, "--help"), nil
}

// subcommandHelpTemplate is urfave/cli's help of a command with
// subcommands, listing them without categories: a command's categories
// are set up only while urfave/cli runs it, and the template's category
// list fails (and ends the help there) on a command it has not.
var subcommandHelpTemplate = strings.Replace(cli.SubcommandHelpTemplate,
	`{{template "visibleCommandCategoryTemplate" .}}`, `{{template "visibleCommandTemplate" .}}`, 1)

// helpAsked: -h or --help is among args (before any '--').
func helpAsked(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "--help":
			return true
		}
	}
	return false
}

// errHelpShown: preflight printed the help asked for; exit 0.
var errHelpShown = errors.New("help shown")

// commandLine is "mcpx" and the names of path.
func commandLine(path []*cli.Command) string {
	s := "mcpx"
	for _, c := range path {
		s += " " + c.Name
	}
	return s
}

func unknownCommand(word string, cmds []*cli.Command, path []*cli.Command) error {
	var names []string
	for _, c := range cmds {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	return usageErr("unknown command %q for '%s'%s (see '%s --help')", word, commandLine(path), editdistance.DidYouMean(word, names), commandLine(path))
}

func unknownFlag(typed, name string, flags []cli.Flag, path []*cli.Command) error {
	var names []string
	for _, f := range flags {
		for _, n := range f.Names() {
			if len(n) > 1 {
				names = append(names, n)
			}
		}
	}
	hint := ""
	if c := editdistance.Closest(name, names); c != "" {
		hint = fmt.Sprintf(" (did you mean --%s?)", c)
	}
	return usageErr("unknown flag %s for '%s'%s (see '%s --help')", typed, commandLine(path), hint, commandLine(path))
}

// helpTopics are what 'mcpx help' explains besides commands.
var helpTopics = []string{"exit-codes"}

// helpCommand is 'mcpx help [COMMAND... | TOPIC]'; preflight turns help
// for a command into that command's --help, so the action sees topics and
// the bare word.
var helpCommand = &cli.Command{
	Name:      "help",
	Aliases:   []string{"h"},
	Usage:     "show help: of mcpx, of a command, or of a topic (exit-codes)",
	ArgsUsage: "[COMMAND... | exit-codes]",
	Action: func(c *cli.Context) error {
		switch c.Args().First() {
		case "":
			return cli.ShowAppHelp(c)
		case "exit-codes":
			return printExitCodes(c.App.Writer)
		}
		return usageErr("no help topic %q%s: topics are %s, or name a command", c.Args().First(),
			editdistance.DidYouMean(c.Args().First(), helpTopics), strings.Join(helpTopics, ", "))
	},
}
