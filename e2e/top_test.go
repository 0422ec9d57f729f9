package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// terminal is a tmux server of the test's own, with one window running a
// command: the test types keys and reads the screen as a user would.
type terminal struct {
	t      *testing.T
	socket string
}

// newTerminal starts cmd (a shell command line) in a 160x30 terminal.
func newTerminal(t *testing.T, name, cmd string) *terminal {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		msg := "tmux is not installed: the terminal view is tested in tmux (apt-get install tmux)"
		if os.Getenv("MCPX_REQUIRE_PEERS") == "1" || os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	term := &terminal{t: t, socket: fmt.Sprintf("mcpx-e2e-%d-%s", os.Getpid(), name)}
	// The command's exit status stays on the screen after it ends.
	wrapped := cmd + `; echo "EXIT $?"; sleep 600`
	if out, err := term.tmux("-f", "/dev/null", "new-session", "-d", "-x", "160", "-y", "30", "sh", "-c", wrapped); err != nil {
		t.Fatalf("starting tmux: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = term.tmux("kill-server") })
	return term
}

func (term *terminal) tmux(args ...string) (string, error) {
	out, err := exec.Command("tmux", append([]string{"-L", term.socket}, args...)...).CombinedOutput()
	return string(out), err
}

// screen is the text on the screen; with escapes, the colour codes too.
func (term *terminal) screen(escapes bool) string {
	term.t.Helper()
	args := []string{"capture-pane", "-p"}
	if escapes {
		args = append(args, "-e")
	}
	out, err := term.tmux(args...)
	if err != nil {
		term.t.Fatalf("reading the screen: %v\n%s", err, out)
	}
	return out
}

// keys types keys (tmux key names: Enter, Escape, q).
func (term *terminal) keys(keys ...string) {
	term.t.Helper()
	if out, err := term.tmux(append([]string{"send-keys"}, keys...)...); err != nil {
		term.t.Fatalf("typing %v: %v\n%s", keys, err, out)
	}
}

// waitScreen waits until every want is on the screen.
func (term *terminal) waitScreen(what string, want ...string) string {
	term.t.Helper()
	var s string
	waitFor(term.t, what, func() (bool, string) {
		s = term.screen(false)
		for _, w := range want {
			if !strings.Contains(s, w) {
				return false, s
			}
		}
		return true, s
	})
	return s
}

// shellCommand is mcpx with this env's environment and globals as one
// shell command line.
func (e *env) shellCommand(extraEnv []string, args ...string) string {
	parts := []string{"env", "-i"}
	for _, kv := range append(e.environ(), extraEnv...) {
		parts = append(parts, shellQuote(kv))
	}
	parts = append(parts, shellQuote(mcpxBin))
	for _, a := range append(e.globals(), args...) {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

// TestTopInTerminal drives `mcpx top` in a real terminal against a real
// proxyd: rows follow the activity stream, the keys sort, filter, open a
// server's failures and quit, and NO_COLOR leaves no colour.
func TestTopInTerminal(t *testing.T) {
	e, _ := fixtureEnv(t, mcpserver.EraBoth, "auto")
	for range 3 {
		e.mustRun("call", "fixture", "echo", "text=top")
	}
	if r := e.run("call", "fixture", "fail"); r.code != 4 {
		t.Fatalf("the failing tool: %s", r)
	}

	term := newTerminal(t, "nocolor", e.shellCommand([]string{"TERM=xterm-256color"}, "top", "--interval", "200ms"))
	term.waitScreen("the fixture's row with its failure", "mcpx top", "SERVER", "fixture", "ready", "tool_error 1", "25.0%")
	// Live: a new failure shows up without a key press.
	e.run("call", "fixture", "fail")
	term.waitScreen("the second failure from the live stream", "tool_error 2", "40.0%")
	if s := term.screen(true); strings.Contains(s, "\x1b[3") || strings.Contains(s, "\x1b[7m") {
		t.Fatalf("NO_COLOR=1, yet the screen has colour or reverse video:\n%q", s)
	}

	// Two keys in one write (typed faster than top reads): both count.
	term.keys("sr")
	term.waitScreen("the sort to change and reverse", "sort failure rate ↑")
	term.keys("f")
	term.waitScreen("the upstream filter", "domain upstream", "1 of 1 servers", "fixture")
	term.keys("f")
	term.waitScreen("the proxy filter", "domain proxy", "no server has proxy failures")
	term.keys("f")
	term.waitScreen("the client filter", "domain client")
	term.keys("f")
	term.waitScreen("the filter back to all", "domain all", "fixture")

	term.keys("Enter")
	term.waitScreen("the fixture's failures", "recent failures of fixture", "fail: this tool always fails", "tool_error", "upstream")
	term.keys("Escape")
	term.waitScreen("the table again", "P99 TREND")
	term.keys("q")
	term.waitScreen("top to quit", "EXIT 0")

	// With colour allowed the failing row is coloured.
	colour := newTerminal(t, "colour", e.shellCommand([]string{"TERM=xterm-256color", "NO_COLOR="}, "top", "--interval", "200ms"))
	colour.waitScreen("the colour view", "fixture", "tool_error 2")
	waitFor(t, "a coloured row", func() (bool, string) {
		s := colour.screen(true)
		return regexp.MustCompile(`\x1b\[[0-9;]*\b33[;m]`).MatchString(s), s
	})
	colour.keys("q")
	colour.waitScreen("top to quit", "EXIT 0")
}

// TestTopFollowsARestart: a top left open while proxyd restarts says it
// does not answer, then follows the new proxyd's calls without a key.
func TestTopFollowsARestart(t *testing.T) {
	e, _ := fixtureEnv(t, mcpserver.EraBoth, "auto")
	if r := e.run("call", "fixture", "fail"); r.code != 4 {
		t.Fatalf("the failing tool: %s", r)
	}
	term := newTerminal(t, "restart", e.shellCommand([]string{"TERM=xterm-256color"}, "top", "--interval", "200ms"))
	term.waitScreen("the first failure", "fixture", "tool_error 1")
	e.stopAll()
	term.waitScreen("top to say proxyd is away", "proxyd does not answer", "(retrying)")
	e.startProxyd()
	e.waitServer("fixture", api.StateReady)
	if r := e.run("call", "fixture", "fail"); r.code != 4 {
		t.Fatalf("the failing tool after the restart: %s", r)
	}
	s := term.waitScreen("the new proxyd's failure", "tool_error 2")
	if strings.Contains(s, "does not answer") {
		t.Errorf("the error line outlived the restart:\n%s", s)
	}
	term.keys("q")
	term.waitScreen("top to quit", "EXIT 0")
}

// Not a terminal: a plain table per interval, --count of them.
func TestTopPlain(t *testing.T) {
	e, _ := fixtureEnv(t, mcpserver.EraBoth, "auto")
	e.mustRun("call", "fixture", "echo", "text=plain")
	var r result
	waitFor(t, "the call to be in top's table", func() (bool, string) {
		r = e.run("top", "--count", "2", "--interval", "100ms")
		return r.code == 0 && regexp.MustCompile(`fixture +ready +0\.\d\d +0\.0%`).MatchString(r.stdout), r.String()
	})
	if strings.Count(r.stdout, "SERVER") != 2 || strings.Contains(r.stdout, "\x1b[") {
		t.Fatalf("want two plain tables:\n%s", r)
	}
	for _, args := range [][]string{{"top", "--window", "1s"}, {"top", "--interval", "1ms"}, {"top", "--fault-domain", "moon"}, {"top", "extra"}} {
		if r := e.run(args...); r.code != 2 {
			t.Errorf("%v: want a usage error:\n%s", args, r)
		}
	}
	e.stopAll()
	if r := e.run("top", "--count", "1"); r.code != 3 || !strings.Contains(r.stderr, "mcpx up") {
		t.Fatalf("without proxyd: want exit 3 and how to start it:\n%s", r)
	}
}
