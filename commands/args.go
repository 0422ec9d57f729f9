package commands

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// normalizeArgs lets flags stand before or after positional arguments and
// global flags stand after the command, which urfave/cli v2 does not do by
// itself. It moves global flags to the front and, for the command being
// run, its flags ahead of its positionals. "--" still ends the flags.
func normalizeArgs(app *cli.App, args []string) []string {
	if len(args) < 2 || args[len(args)-1] == "--generate-bash-completion" {
		// Completion reads its marker from the very end: leave it be.
		return args
	}
	globals, rest := extractFlags(args[1:], app.Flags, false)
	out := append([]string{args[0]}, globals...)
	cmds := app.Commands
	for len(rest) > 0 {
		// Walk down the command tree while the next word names a command.
		cmd := findCommand(cmds, rest[0])
		if cmd == nil {
			break
		}
		out = append(out, rest[0])
		rest = rest[1:]
		if len(cmd.Subcommands) > 0 {
			// Flags written before a subcommand belong to the parent;
			// everything after it to the subcommand.
			if i := subcommandIndex(rest, cmd); i >= 0 {
				out = append(out, rest[:i]...)
				rest, cmds = rest[i:], cmd.Subcommands
				continue
			}
		}
		flags, pos := extractFlags(rest, cmd.Flags, true)
		out = append(out, flags...)
		if len(pos) > 0 {
			if strings.HasPrefix(pos[0], "-") {
				out = append(out, "--")
			}
			out = append(out, pos...)
		}
		return out
	}
	return append(out, rest...)
}

// subcommandIndex is the index in args of the first word that names one
// of cmd's subcommands, skipping cmd's own flags and their values; -1 when
// a positional that is not a subcommand comes first.
func subcommandIndex(args []string, cmd *cli.Command) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return -1
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			name := strings.TrimLeft(a, "-")
			if strings.Contains(name, "=") {
				continue
			}
			if f := lookupFlag(cmd.Flags, name); f != nil && takesValue(f) {
				i++
			}
			continue
		}
		if findCommand(cmd.Subcommands, a) != nil {
			return i
		}
		return -1
	}
	return -1
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name {
			return c
		}
		for _, a := range c.Aliases {
			if a == name {
				return c
			}
		}
	}
	return nil
}

func isNumber(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && r != '.' {
			return false
		}
	}
	return true
}

// extractFlags splits args into the tokens of the given flags (with their
// values) and everything else. With stopAtDashDash, "--" ends the flags and
// is dropped; without it, "--" and what follows stay in the rest.
func extractFlags(args []string, flags []cli.Flag, stopAtDashDash bool) (matched, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if stopAtDashDash {
				return matched, append(rest, args[i+1:]...)
			}
			return matched, append(rest, args[i:]...)
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			rest = append(rest, a)
			continue
		}
		name := strings.TrimLeft(a, "-")
		hasValue := false
		if eq := strings.IndexByte(name, '='); eq >= 0 {
			name, hasValue = name[:eq], true
		}
		f := lookupFlag(flags, name)
		if f == nil {
			if stopAtDashDash && !isNumber(a) {
				// Unknown: leave it where the parser will name it.
				matched = append(matched, a)
			} else {
				rest = append(rest, a)
			}
			continue
		}
		matched = append(matched, a)
		if !hasValue && takesValue(f) && i+1 < len(args) {
			matched = append(matched, args[i+1])
			i++
		}
	}
	return matched, rest
}

func lookupFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

func takesValue(f cli.Flag) bool {
	if v, ok := f.(cli.DocGenerationFlag); ok {
		return v.TakesValue()
	}
	return false
}

// parseHeaders reads repeatable --header K:V flags (for servers add and
// probe). A value is usually a credential, so an error names the flag's
// position, never what was written.
func parseHeaders(flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(flags))
	for i, h := range flags {
		k, v, ok := strings.Cut(h, ":")
		k = strings.TrimSpace(k)
		if !ok || !isHeaderName(k) {
			return nil, usageErr("--header #%d is not K:V (a header name, a colon, the value)", i+1)
		}
		out[k] = strings.TrimSpace(v)
	}
	return out, nil
}

// isHeaderName: a non-empty RFC 9110 token.
func isHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
