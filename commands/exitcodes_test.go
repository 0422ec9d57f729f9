package commands

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// TestExitCodesREADME: the README's "Exit codes" table is exitCodes.
func TestExitCodesREADME(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Exit codes\n")
	if !ok {
		t.Fatal(`README has no "## Exit codes" section`)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	if want := exitCodesMarkdown(); !strings.Contains(sec, want) {
		t.Errorf("README's exit-code table differs from commands/exitcodes.go; it should read:\n%s", want)
	}
}

func TestPreflight(t *testing.T) {
	tests := []struct {
		args    []string
		want    string // the rewritten line, or the error's text
		wantErr bool
	}{
		{args: []string{"tools", "docs", "--help"}, want: "mcpx tools --help"},
		{args: []string{"call", "docs", "search", "q=1", "-h"}, want: "mcpx call --help"},
		{args: []string{"--socket", "/s", "help", "tools"}, want: "mcpx --socket /s tools --help"},
		{args: []string{"help", "exit-codes"}, want: "mcpx help exit-codes"},
		{args: []string{"servers", "add", "x", "--", "cmd", "--help"}, want: "mcpx servers add x -- cmd --help"},
		// call and tools: a stdio command after '--' is kept apart.
		{args: []string{"call", "echo", "text=hi", "--", "npx", "server", "--port", "1"}, want: "mcpx call echo text=hi"},
		{args: []string{"tools", "--outptu", "json"}, want: "unknown flag --outptu for 'mcpx tools' (did you mean --output?)", wantErr: true},
		{args: []string{"statsu"}, want: `unknown command "statsu" for 'mcpx' (did you mean "status"?)`, wantErr: true},
		{args: []string{"drill", "sesion"}, want: `unknown command "sesion" for 'mcpx drill' (did you mean "session"?)`, wantErr: true},
		{args: []string{"activity", "--since", "-1h"}, want: "mcpx activity --since -1h"},
		{args: []string{"down", "extra"}, want: `'mcpx down' takes no arguments (got "extra"`, wantErr: true},
		{args: []string{"servers", "list", "x"}, want: `'mcpx servers list' takes no arguments`, wantErr: true},
		{args: []string{"connect-info", "--show-token", "x"}, want: `'mcpx connect-info' takes no arguments`, wantErr: true},
		{args: []string{"down", "extra", "--help"}, want: "mcpx down --help"},
		{args: []string{"up", "--timeout", "5s"}, want: "mcpx up --timeout 5s"},
	}
	app := New(io.Discard, io.Discard)
	if _, err := preflight(app, []string{"mcpx", "help", "drill", "session"}); !errors.Is(err, errHelpShown) {
		t.Errorf("help of a subcommand: %v, want its help printed", err)
	}
	for _, tt := range tests {
		got, err := preflight(app, append([]string{"mcpx"}, tt.args...))
		switch {
		case tt.wantErr && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%v: error %v, want one with %q", tt.args, err, tt.want)
		case tt.wantErr && ExitCode(err) != ExitUsage:
			t.Errorf("%v: exit %d, want %d", tt.args, ExitCode(err), ExitUsage)
		case !tt.wantErr && (err != nil || strings.Join(got, " ") != tt.want):
			t.Errorf("%v: got %q, %v; want %q", tt.args, strings.Join(got, " "), err, tt.want)
		}
	}
}

// TestHelpOfCommandsWithSubcommands: the help of a command with
// subcommands lists them and its flags, however it is asked for.
func TestHelpOfCommandsWithSubcommands(t *testing.T) {
	var b strings.Builder
	app := New(&b, io.Discard)
	for _, c := range app.Commands {
		if len(c.Subcommands) == 0 || c.Hidden {
			continue
		}
		for _, line := range [][]string{{"mcpx", c.Name, "--help"}, {"mcpx", "help", c.Name}, {"mcpx", c.Name, "-h"}} {
			b.Reset()
			if _, err := preflight(app, line); !errors.Is(err, errHelpShown) {
				t.Errorf("%v: %v, want the help printed", line, err)
				continue
			}
			help := b.String()
			for _, want := range []string{"USAGE:", "COMMANDS:", "OPTIONS:", "--help, -h"} {
				if !strings.Contains(help, want) {
					t.Errorf("%v: no %q in\n%s", line, want, help)
				}
			}
			for _, s := range c.VisibleCommands() {
				if !strings.Contains(help, "\n   "+s.Name) {
					t.Errorf("%v: subcommand %q not listed in\n%s", line, s.Name, help)
				}
			}
			for _, f := range c.VisibleFlags() {
				if name := f.Names()[0]; !strings.Contains(help, "--"+name) {
					t.Errorf("%v: flag --%s not listed in\n%s", line, name, help)
				}
			}
		}
	}
}
