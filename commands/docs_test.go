package commands

import (
	"io"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestDocs holds every command to the help contract: a one-line summary,
// and for commands that do something, a description with examples.
func TestDocs(t *testing.T) {
	app := New(io.Discard, io.Discard)
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			name := strings.TrimSpace(prefix + " " + c.Name)
			if c.Name == "help" {
				continue
			}
			if c.Usage == "" {
				t.Errorf("%s: no usage line", name)
			}
			if strings.HasSuffix(c.Usage, ".") {
				t.Errorf("%s: usage line ends with a period", name)
			}
			if c.Action != nil && len(c.Subcommands) == 0 && !strings.Contains(c.Description, "Examples:") && prefix == "" {
				t.Errorf("%s: description has no examples", name)
			}
			if prefix == "" && c.Category == "" {
				t.Errorf("%s: no help category", name)
			}
			walk(name, c.Subcommands)
		}
	}
	walk("", app.Commands)
}

// TestHelpFlags: every flag that takes a value names it with a placeholder
// (SERVER, DURATION, ...: never urfave's "value"), and says its default
// once.
func TestHelpFlags(t *testing.T) {
	app := New(io.Discard, io.Discard)
	var walk func(prefix []string, cmds []*cli.Command)
	walk = func(prefix []string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Name == "help" {
				continue
			}
			path := append(append([]string{}, prefix...), c.Name)
			for _, f := range c.Flags {
				line := f.String()
				if strings.Contains(line, " value\t") || strings.HasSuffix(strings.SplitN(line, "\t", 2)[0], " value") {
					t.Errorf("mcpx %s: flag %q has no placeholder: %s", strings.Join(path, " "), f.Names()[0], line)
				}
				if strings.Count(line, "(default") > 1 {
					t.Errorf("mcpx %s: flag %q says its default twice: %s", strings.Join(path, " "), f.Names()[0], line)
				}
			}
			walk(path, c.Subcommands)
		}
	}
	walk(nil, app.Commands)
}
