package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
)

// TestCompletionPerShell runs each shell's completion script in that
// shell against a running proxyd: tool names after 'call SERVER', server
// names after probe, drill and status, flag values, and no help after the
// first word. zsh and fish run where installed (MCPX_REQUIRE_SHELLS=1
// makes them required, as 'make test' does).
func TestCompletionPerShell(t *testing.T) {
	e, _ := fixtureEnv(t, mcpserver.EraBoth, "auto")
	env := append(e.environ(), "PATH="+filepath.Dir(mcpxBin)+":"+os.Getenv("PATH"),
		"MCPX_SOCKET="+e.Socket, "MCPX_CONFIG="+e.Config, "MCPX_STATE_DIR="+e.StateDir)

	// Each case: the words typed before the one being completed, and what
	// the candidates must (and must not) hold.
	cases := []struct {
		words      []string
		want, deny []string
	}{
		{[]string{"call", "fixture"}, []string{"echo", "add"}, nil},
		{[]string{"probe"}, []string{"fixture"}, nil},
		{[]string{"drill", "session"}, []string{"fixture"}, nil},
		{[]string{"status"}, []string{"fixture"}, nil},
		{[]string{"activity", "-o"}, []string{"table", "json", "yaml"}, []string{"sarif"}},
		{[]string{"probe", "-o"}, []string{"table", "json", "sarif", "junit"}, nil},
		{[]string{"drill", "refresh", "x", "--output"}, []string{"yaml", "sarif", "junit"}, nil},
		{[]string{"activity", "summary", "--by"}, []string{"class", "domain", "tool"}, nil},
		{[]string{"activity", "--fault-domain"}, []string{"upstream", "proxy", "client"}, nil},
		{[]string{"activity", "--error-class"}, []string{"session_terminated", "proxy_policy"}, nil},
		{[]string{"servers", "add", "x", "--transport"}, []string{"streamable-http", "sse", "stdio"}, nil},
		{[]string{"drill"}, []string{"session", "refresh"}, []string{"help"}},
	}
	shells := map[string]func(words []string) []string{
		"bash": func(words []string) []string {
			script := `source <(mcpx completion bash)
COMP_WORDS=(mcpx ` + strings.Join(words, " ") + ` ""); COMP_CWORD=${#COMP_WORDS[@]}; COMP_CWORD=$((COMP_CWORD-1))
_mcpx_complete; printf '%s\n' "${COMPREPLY[@]}"`
			return runShell(t, env, "bash", "-c", script)
		},
		"zsh": func(words []string) []string {
			// compdef and _describe are the completion system's; here they
			// print what they were given.
			script := `compdef(){ :; }; _describe(){ print -l ${(P)2}; }; _files(){ :; }
source <(mcpx completion zsh); words=(mcpx ` + strings.Join(words, " ") + ` ""); _mcpx`
			return runShell(t, env, "zsh", "-f", "-c", script)
		},
		"fish": func(words []string) []string {
			script := `mcpx completion fish | source; complete -C "mcpx ` + strings.Join(words, " ") + ` "`
			return runShell(t, env, "fish", "--no-config", "-c", script)
		},
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			if _, err := exec.LookPath(shell); err != nil {
				if os.Getenv("MCPX_REQUIRE_SHELLS") == "1" {
					t.Fatalf("%s is not installed (MCPX_REQUIRE_SHELLS=1)", shell)
				}
				t.Skipf("%s is not installed", shell)
			}
			for _, c := range cases {
				got := shells[shell](c.words)
				for _, w := range c.want {
					if !containsWord(got, w) {
						t.Errorf("%s: completing 'mcpx %s ': %q missing from %q", shell, strings.Join(c.words, " "), w, got)
					}
				}
				for _, d := range c.deny {
					if containsWord(got, d) {
						t.Errorf("%s: completing 'mcpx %s ': %q offered", shell, strings.Join(c.words, " "), d)
					}
				}
			}
		})
	}
}

func runShell(t *testing.T, env []string, name string, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	var words []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			words = append(words, strings.TrimSuffix(f[0], ":"))
		}
	}
	return words
}

func containsWord(ws []string, w string) bool {
	for _, x := range ws {
		if x == w {
			return true
		}
	}
	return false
}
