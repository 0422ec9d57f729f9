package e2e

import (
	"encoding/json"
	"errors"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/syncbuf"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// TestOutputConsistency: -o everywhere (activity export too, --format an
// alias), schema_version in JSON, times local with offset in tables and
// UTC in JSON, time flags that take what tables print, 'mcpx activity ID',
// and follow --until.
func TestOutputConsistency(t *testing.T) {
	e, _ := fixtureEnv(t, mcpserver.EraBoth, "auto")
	e.mustRun("call", "fixture", "echo", "text=one")

	var recs []map[string]any
	r := e.runJSON(0, &recs, "activity")
	if len(recs) != 1 || recs[0]["schema_version"] != float64(1) {
		t.Fatalf("activity -o json: want one record with schema_version 1\n%s", r)
	}
	if when, _ := recs[0]["time"].(string); !strings.HasSuffix(when, "Z") {
		t.Errorf("JSON time %q is not UTC", when)
	}
	var st map[string]any
	e.runJSON(0, &st, "status")
	if st["schema_version"] != float64(1) {
		t.Errorf("status -o json lacks schema_version")
	}
	id := strings.TrimSuffix(strings.TrimSuffix(jsonNumber(recs[0]["id"]), ".0"), "")
	if r := e.run("activity", id); r.code != 0 || !strings.Contains(r.stdout, "echo") {
		t.Errorf("mcpx activity ID:\n%s", r)
	}

	// The table's time, given back to --since, finds the record.
	table := e.mustRun("activity").stdout
	m := regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d\d:\d\d`).FindString(table)
	if m == "" {
		t.Fatalf("the activity table shows no local time with its offset:\n%s", table)
	}
	if r := e.run("activity", "--since", m, "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"echo"`) {
		t.Errorf("--since %q (as the table prints it):\n%s", m, r)
	}

	for _, args := range [][]string{{"-o", "csv"}, {"--format", "csv"}} {
		if r := e.run(append([]string{"activity", "export"}, args...)...); r.code != 0 || !strings.HasPrefix(r.stdout, "id,time,server") {
			t.Errorf("activity export %v:\n%s", args, r)
		}
	}
	if r := e.run("activity", "export", "-o", "yaml"); r.code != 0 || !strings.Contains(r.stdout, "schema_version: 1") {
		t.Errorf("activity export -o yaml:\n%s", r)
	}
	if r := e.run("activity", "export", "-o", "xml"); r.code != 2 {
		t.Errorf("activity export -o xml: want exit 2\n%s", r)
	}

	if r := e.run("activity", "follow", "--until", "1h"); r.code != 2 || !strings.Contains(r.stderr, "not in the future") {
		t.Errorf("follow --until in the past: want exit 2\n%s", r)
	}
	if r := e.run("activity", "follow", "--until", "+300ms"); r.code != 0 {
		t.Errorf("follow --until +300ms: want it to end by itself with exit 0\n%s", r)
	}
	// Off a terminal follow streams TSV rows, as the list prints them:
	// calls are made until one shows in the stream (follow starts from
	// now, so the first may come before it listens).
	var out syncbuf.Buffer
	follow := exec.Command(mcpxBin, append(e.globals(), "activity", "follow", "--until", "+60s")...)
	follow.Env, follow.Stdout = e.environ(), &out
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = follow.Process.Kill(); _ = follow.Wait() }()
	calls := 0
	waitfor.Cond(t, 30*time.Second, "a followed call in the stream", func() (bool, string) {
		if strings.Contains(out.String(), "\techo\t") {
			return true, ""
		}
		if calls < 100 {
			calls++
			e.mustRun("call", "fixture", "echo", "text=followed")
		}
		return false, out.String()
	})
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.Count(line, "\t") != 8 || strings.Contains(line, "\x1b[") {
			t.Errorf("follow, piped: not a TSV row of nine cells: %q", line)
		}
	}

	var up map[string]any
	e.runJSON(0, &up, "up")
	if up["pid"] == nil {
		t.Errorf("up -o json: %v", up)
	}
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A follow whose proxyd stops says so and exits 3, rather than ending as
// if what it was asked for were done.
func TestFollowEndsWithProxyd(t *testing.T) {
	e, p := fixtureEnv(t, mcpserver.EraBoth, "auto")
	f := startFollow(t, e, "-o", "json")
	f.waitCall(t, e)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t, 15*time.Second); err != nil {
		t.Logf("proxyd: %v", err)
	}
	select {
	case <-f.exited:
		var ee *exec.ExitError
		if !errors.As(f.err, &ee) || ee.ExitCode() != 3 || !strings.Contains(f.errOut.String(), "proxyd ended the stream") {
			t.Errorf("follow after proxyd stopped: %v\nstderr: %s", f.err, f.errOut.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("follow still running 15 s after proxyd stopped")
	}
}

// followProc is `mcpx activity follow` running beside the test.
type followProc struct {
	cmd         *exec.Cmd
	out, errOut syncbuf.Buffer
	exited      chan struct{}
	err         error // once exited is closed
}

// startFollow starts `mcpx activity follow ARGS`, killed at the test's end.
func startFollow(t *testing.T, e *env, args ...string) *followProc {
	t.Helper()
	f := &followProc{exited: make(chan struct{})}
	f.cmd = exec.Command(mcpxBin, append(e.globals(), append([]string{"activity", "follow"}, args...)...)...)
	f.cmd.Env, f.cmd.Stdout, f.cmd.Stderr = e.environ(), &f.out, &f.errOut
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { f.err = f.cmd.Wait(); close(f.exited) }()
	t.Cleanup(func() { _ = f.cmd.Process.Kill(); <-f.exited })
	return f
}

// waitCall calls the fixture's echo until the follow prints one: the
// first calls may end before it has subscribed.
func (f *followProc) waitCall(t *testing.T, e *env) {
	t.Helper()
	calls := 0
	waitfor.Cond(t, 30*time.Second, "a followed call in the stream", func() (bool, string) {
		if strings.Contains(f.out.String(), `"echo"`) {
			return true, ""
		}
		if calls < 100 {
			calls++
			e.mustRun("call", "fixture", "echo", "text=followed")
		}
		return false, f.out.String() + f.errOut.String()
	})
}

// records are the JSON lines the follow printed so far; a record shown
// twice or out of id order fails t.
func (f *followProc) records(t *testing.T) []api.ActivityRecord {
	t.Helper()
	var recs []api.ActivityRecord
	for _, line := range strings.Split(strings.TrimSpace(f.out.String()), "\n") {
		var r api.ActivityRecord
		if line == "" || json.Unmarshal([]byte(line), &r) != nil {
			continue
		}
		if n := len(recs); n > 0 && r.ID <= recs[n-1].ID {
			t.Errorf("record %d after %d: shown twice or out of order\n%s", r.ID, recs[n-1].ID, f.out.String())
		}
		recs = append(recs, r)
	}
	return recs
}

// restartHeld stops e's proxyd p under a follow with --retry and waits
// for the follow to say it waits; then, holding the follow still
// (SIGSTOP), runs between (when not nil), starts a new proxyd of e and
// makes a failing call through it, and lets the follow go on. Those
// calls end before the follow can subscribe again, so they can reach it
// only from the record.
func (f *followProc) restartHeld(t *testing.T, e *env, p *proxydProc, between func()) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t, 15*time.Second); err != nil {
		t.Logf("proxyd: %v", err)
	}
	waitfor.Cond(t, 15*time.Second, "the follow to say it waits", func() (bool, string) {
		return strings.Contains(f.errOut.String(), "waiting for it to answer again"), f.errOut.String()
	})
	if err := f.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if between != nil {
		between()
	}
	e.startProxyd()
	e.waitServer("fixture", api.StateReady)
	if r := e.run("call", "fixture", "fail"); r.code != 4 {
		t.Fatalf("the failing tool: %s", r)
	}
	if err := f.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// TestFollowRetriesAcrossARestart: with --retry a follow outlives proxyd:
// it says it waits, and once a new proxyd answers it prints first the
// calls that ended while it was not following (from the record), then
// the live ones, each record once.
func TestFollowRetriesAcrossARestart(t *testing.T) {
	e, p := fixtureEnv(t, mcpserver.EraBoth, "auto")
	f := startFollow(t, e, "-o", "json", "--retry")
	tools := func() []string {
		var names []string
		for _, r := range f.records(t) {
			names = append(names, r.Tool)
		}
		return names
	}
	f.waitCall(t, e)
	f.restartHeld(t, e, p, nil)
	// Every echo before the stop (some perhaps only from the record),
	// then the call made in between.
	shown := func(want ...string) (bool, string) {
		names := tools()
		n := len(names) - len(want)
		ok := n > 0 && slices.Equal(names[n:], want) && !slices.ContainsFunc(names[:n], func(s string) bool { return s != "echo" })
		return ok, strings.Join(names, " ") + "\n" + f.errOut.String()
	}
	waitfor.Cond(t, 15*time.Second, "the call made in between", func() (bool, string) { return shown("fail") })
	// The live stream opened before the record was read: a call now
	// comes through it.
	e.mustRun("call", "fixture", "add", "a=1", "b=2")
	waitfor.Cond(t, 15*time.Second, "a live call after the restart", func() (bool, string) { return shown("fail", "add") })
	if !strings.Contains(f.errOut.String(), "proxyd answers again") {
		t.Errorf("the follow did not say it goes on:\n%s", f.errOut.String())
	}
	select {
	case <-f.exited:
		t.Fatalf("the follow exited:\n%s", f.errOut.String())
	default:
	}
}

// TestFollowOtherReplica: a follow names its own proxyd's calls; a
// --replica naming only other replicas is refused, saying why.
func TestFollowOtherReplica(t *testing.T) {
	e, _ := fixtureEnv(t, mcpserver.EraBoth, "auto")
	r := e.run("activity", "follow", "--replica", "r9")
	if r.code != 2 || !strings.Contains(r.stderr, "a follow streams its own calls") || !strings.Contains(r.stderr, "mcpx activity --replica r9") {
		t.Errorf("follow --replica of another replica: want exit 2 naming why:\n%s", r)
	}
}

// TestFollowRetryWaitsForProxyd: follow --retry started before proxyd
// waits for it, saying so, rather than exiting 3.
func TestFollowRetryWaitsForProxyd(t *testing.T) {
	fx := startFixture(t, mcpserver.EraBoth)
	e := newEnv(t)
	e.writeConfig(fixtureConfig(fx.URL(), "auto"))
	f := startFollow(t, e, "-o", "json", "--retry")
	waitfor.Cond(t, 15*time.Second, "the follow to say it waits", func() (bool, string) {
		return strings.Contains(f.errOut.String(), "proxyd is not running; waiting for it to answer"), f.errOut.String()
	})
	e.startProxyd()
	e.waitServer("fixture", api.StateReady)
	f.waitCall(t, e)
}
