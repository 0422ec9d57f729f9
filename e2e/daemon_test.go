package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// fileLineCol matches "config.yaml:LINE:COL" in an error message.
var fileLineCol = regexp.MustCompile(`config\.yaml:\d+:\d+`)

// garbageConfig is not YAML a config can come from: an unclosed flow
// sequence on line 3.
const garbageConfig = "listen: 127.0.0.1:0\nservers:\n  - name: [broken\n    url: ::::\n"

func TestUpIsIdempotentAndDownStops(t *testing.T) {
	// The fixture as a program here, the way the demo runs it.
	e := newEnv(t)
	e.writeConfig(fixtureConfig(startFixtureProcess(t, "--era", "legacy"), "auto"))

	r := e.mustRun("up")
	if !strings.Contains(r.stdout, "started") {
		t.Errorf("first up: want a 'started' line:\n%s", r)
	}
	st := e.status()
	if st.PID == 0 || st.Socket != e.Socket {
		t.Errorf("status after up: pid %d socket %q, want a pid and socket %q", st.PID, st.Socket, e.Socket)
	}

	if s := e.waitServer("fixture", api.StateReady); s.Era != "legacy" {
		t.Errorf("fixture started with --era legacy negotiated era %q", s.Era)
	}
	if r := e.run("call", "fixture", "echo", "text=via-up"); r.code != 0 || !strings.Contains(r.stdout, "via-up") {
		t.Errorf("call through a daemon started by up:\n%s", r)
	}

	r = e.mustRun("up")
	if !strings.Contains(r.stdout, "already running") {
		t.Errorf("second up: want 'already running':\n%s", r)
	}
	if again := e.status(); again.PID != st.PID {
		t.Errorf("second up replaced the daemon: pid %d, was %d", again.PID, st.PID)
	}

	e.mustRun("down")
	// down waits until the socket is gone; the process may take a moment to exit.
	waitFor(t, "proxyd's process to exit", func() (bool, string) {
		return processGone(st.PID), fmt.Sprintf("pid %d alive", st.PID)
	})
	if _, err := os.Stat(e.Socket); !os.IsNotExist(err) {
		t.Errorf("socket %s still there after down (stat: %v)", e.Socket, err)
	}

	for _, args := range [][]string{{"status"}, {"tools"}, {"call", "fixture", "echo", "text=x"}, {"reload"}} {
		r := e.run(args...)
		if r.code != 3 {
			t.Errorf("after down, want exit 3 (proxyd not running):\n%s", r)
			continue
		}
		if !strings.Contains(r.stderr, e.Socket) || !strings.Contains(r.stderr, "mcpx up") {
			t.Errorf("after down, want the socket path and 'mcpx up' in the message:\n%s", r)
		}
	}
	if r := e.run("down"); r.code != 0 {
		t.Errorf("down when not running should succeed:\n%s", r)
	}
}

func TestProxydRefusesMalformedConfig(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   string // in the message besides file:line:col
	}{
		{name: "not YAML", config: garbageConfig, want: "invalid YAML"},
		{name: "unknown key", config: "listen: 127.0.0.1:0\nservers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n    hedaers: {X: y}\n", want: "hedaers"},
		{name: "non-loopback listen", config: "listen: 0.0.0.0:0\n", want: "loopback"},
		{name: "stdio without command", config: "servers:\n  - name: x\n    transport: stdio\n", want: "command"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.writeConfig(tc.config)
			p := e.spawnProxyd()
			if err := p.wait(t, runTimeout); err == nil {
				t.Fatalf("proxyd started on a malformed config\nstderr:\n%s", p.stderr)
			}
			if code := p.cmd.ProcessState.ExitCode(); code != 7 {
				t.Errorf("exit code %d, want 7 (invalid config)\nstderr:\n%s", code, p.stderr)
			}
			msg := p.stderr.String()
			if !fileLineCol.MatchString(msg) || !strings.Contains(msg, tc.want) {
				t.Errorf("want file:line:col and %q in the message\nstderr:\n%s", tc.want, msg)
			}
			if _, err := os.Stat(e.Socket); !os.IsNotExist(err) {
				t.Errorf("a refused proxyd left its socket behind (stat: %v)", err)
			}
			// The CLI reports the same file:line:col without a daemon.
			if r := e.run("servers", "list"); r.code != 7 || !fileLineCol.MatchString(r.stderr) {
				t.Errorf("servers list on a malformed config: want exit 7 and file:line:col:\n%s", r)
			}
		})
	}
}

func TestProxydRefusesTooLongSocketPath(t *testing.T) {
	e := newEnv(t)
	e.writeConfig("listen: 127.0.0.1:0\n")
	e.Socket = filepath.Join(e.dir, strings.Repeat("d", 100), "proxyd.sock")
	p := e.spawnProxyd()
	if err := p.wait(t, runTimeout); err == nil {
		t.Fatalf("proxyd started on a %d-byte socket path\nstderr:\n%s", len(e.Socket), p.stderr)
	}
	if msg := p.stderr.String(); !strings.Contains(msg, e.Socket) || !strings.Contains(msg, "--socket") {
		t.Errorf("want the path and how to choose another (--socket) in the message\nstderr:\n%s", msg)
	}
}

func TestSecondProxydOnSameSocketRefused(t *testing.T) {
	e, first := fixtureEnv(t, mcpserver.EraBoth, "auto")

	second := e.spawnProxyd()
	if err := second.wait(t, runTimeout); err == nil {
		t.Fatalf("a second proxyd on the same socket exited 0\nstderr:\n%s", second.stderr)
	}
	if !strings.Contains(second.stderr.String(), "already running") {
		t.Errorf("second proxyd: want 'already running'\nstderr:\n%s", second.stderr)
	}
	if first.exited() {
		t.Fatalf("the first proxyd died: %v", first.err)
	}
	if st := e.status(); st.PID != first.cmd.Process.Pid {
		t.Errorf("status answered by pid %d, want the first proxyd %d", st.PID, first.cmd.Process.Pid)
	}
	if r := e.run("call", "fixture", "echo", "text=still-here"); r.code != 0 || !strings.Contains(r.stdout, "still-here") {
		t.Errorf("first proxyd no longer serves calls:\n%s", r)
	}
}

func TestServersAddRemoveAndBadEdit(t *testing.T) {
	one := startFixture(t, mcpserver.EraBoth)
	two := startFixture(t, mcpserver.EraLegacy)
	e := newEnv(t)
	e.writeConfig(fixtureConfig(one.URL(), "auto"))
	e.startProxyd()
	e.waitServer("fixture", api.StateReady)

	r := e.mustRun("servers", "add", "second", two.URL())
	if !strings.Contains(r.stdout, "second") {
		t.Errorf("servers add: want the name in the output:\n%s", r)
	}
	e.waitServer("second", api.StateReady)
	if r := e.run("call", "second", "echo", "text=from-second"); r.code != 0 || !strings.Contains(r.stdout, "from-second") {
		t.Errorf("call on the added server:\n%s", r)
	}
	for _, args := range [][]string{{"servers", "-o", "json"}, {"servers", "list", "-o", "json"}} {
		var list []api.ServerStatus
		r := e.run(args...)
		if err := json.Unmarshal([]byte(r.stdout), &list); r.code != 0 || err != nil {
			t.Errorf("want a JSON server list (%v):\n%s", err, r)
		} else if names := serverNames(list); !equalSets(names, []string{"fixture", "second"}) {
			t.Errorf("%v: %v, want fixture and second", args, names)
		}
	}

	if r := e.run("servers", "add", "second", two.URL()); r.code == 0 || !strings.Contains(r.stderr, "second") {
		t.Errorf("adding a duplicate name: want a non-zero exit naming it:\n%s", r)
	}
	if r := e.run("servers", "remove", "nosuch"); r.code == 0 || !strings.Contains(r.stderr, "nosuch") {
		t.Errorf("removing an unknown server: want a non-zero exit naming it:\n%s", r)
	}
	// Another file than the one proxyd reads: written, but not served,
	// and the command says so rather than report a reload.
	other := filepath.Join(e.dir, "other.yaml")
	r = e.run("servers", "add", "third", two.URL(), "--config", other)
	if r.code != 1 || !strings.Contains(r.stderr, "not served") || !strings.Contains(r.stderr, e.Config) || strings.Contains(r.stdout, "reloaded") {
		t.Errorf("servers add to another config: want exit 1 naming the file proxyd reads:\n%s", r)
	}
	if b, err := os.ReadFile(other); err != nil || !strings.Contains(string(b), "third") {
		t.Errorf("servers add to another config: not written (%v): %s", err, b)
	}
	if r := e.run("servers", "--config", other); r.code != 0 || !strings.Contains(r.stderr, "reads "+e.Config) {
		t.Errorf("servers with another config: want a warning:\n%s", r)
	}
	e.mustRun("servers", "remove", "second")
	e.waitFor("server second to disappear", func() (bool, string) {
		names := serverNames(e.status().Servers)
		return equalSets(names, []string{"fixture"}), fmt.Sprint(names)
	})

	// A broken edit: the daemon keeps the servers it has and says why.
	e.writeConfig(garbageConfig)
	r = e.run("reload")
	if r.code == 0 {
		t.Errorf("reload of a malformed config exited 0:\n%s", r)
	}
	if !fileLineCol.MatchString(r.stderr) {
		t.Errorf("reload: want file:line:col in the message:\n%s", r)
	}
	st := e.status()
	if names := serverNames(st.Servers); !equalSets(names, []string{"fixture"}) {
		t.Errorf("after a broken edit the servers are %v, want the old [fixture]", names)
	}
	if r := e.run("call", "fixture", "echo", "text=after-bad-edit"); r.code != 0 || !strings.Contains(r.stdout, "after-bad-edit") {
		t.Errorf("daemon stopped serving after a broken edit:\n%s", r)
	}
	// The list is the running configuration's: it says why the file's
	// edit is not in it.
	for _, args := range [][]string{{"servers"}, {"servers", "-o", "json"}} {
		if r := e.run(args...); r.code != 0 || !strings.Contains(r.stderr, "kept its running configuration") || !fileLineCol.MatchString(r.stderr) {
			t.Errorf("%v after a broken edit: want the config error on stderr:\n%s", args, r)
		}
	}
	// Fixing the file brings it back in line.
	e.writeConfig(fixtureConfig(one.URL(), "auto"))
	e.mustRun("reload")
}

func TestBrokenUpstreamsLeaveOthersServing(t *testing.T) {
	fx := startFixture(t, mcpserver.EraBoth)
	e := newEnv(t)
	e.writeConfig(fmt.Sprintf(`listen: 127.0.0.1:0
servers:
  - name: fixture
    url: %s
  - name: unreachable
    url: http://%s/mcp
  - name: crashing
    command: sh
    args: ["-c", "exit 3"]
`, fx.URL(), freeAddr(t)))
	e.startProxyd()
	e.waitServer("fixture", api.StateReady)
	for _, name := range []string{"unreachable", "crashing"} {
		s := e.waitServer(name, api.StateError)
		if s.LastError == "" {
			t.Errorf("server %s in state error without last_error: %+v", name, s)
		}
		t.Logf("%s: last_error=%q", name, s.LastError)
	}
	// The message names the cause, not just a closed transport.
	if s := e.waitServer("crashing", api.StateError); !strings.Contains(s.LastError, "exit") || !strings.Contains(s.LastError, "3") {
		t.Errorf("crashing stdio upstream: last_error %q does not say that the process exited (status 3)", s.LastError)
	}
	if s := e.waitServer("unreachable", api.StateError); !strings.Contains(s.LastError, "refused") {
		t.Errorf("unreachable upstream: last_error %q does not say the connection was refused", s.LastError)
	}
	r := e.mustRun("status")
	for _, want := range []string{"unreachable", "crashing", "error"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status table: want %q:\n%s", want, r)
		}
	}
	if r := e.run("call", "fixture", "echo", "text=ok"); r.code != 0 || !strings.Contains(r.stdout, "ok") {
		t.Errorf("the healthy server stopped serving:\n%s", r)
	}
	r = e.run("call", "unreachable", "echo", "text=x", "-o", "json")
	if r.code != 4 {
		t.Errorf("call on an unreachable server: want exit 4:\n%s", r)
	}
}

func TestKillAndRestartKeepsState(t *testing.T) {
	e, p := fixtureEnv(t, mcpserver.EraBoth, "auto")

	var ids []string
	for _, text := range []string{"before-kill-1", "before-kill-2"} {
		var res api.CallResponse
		e.runJSON(0, &res, "call", "fixture", "echo", "text="+text)
		if res.RequestID == "" {
			t.Fatalf("call %s: no request_id in %+v", text, res)
		}
		ids = append(ids, res.RequestID)
	}
	// Listing flushes pending activity records to the database.
	before := e.activityRequestIDs()
	for _, id := range ids {
		if !before[id] {
			t.Fatalf("no activity record for request %s before the kill; have %v", id, before)
		}
	}

	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	_ = p.wait(t, runTimeout)
	// SIGKILL leaves the socket file behind: the restart must see it is dead.
	if _, err := os.Stat(e.Socket); err != nil {
		t.Fatalf("precondition: a stale socket file after SIGKILL (stat: %v)", err)
	}
	if r := e.run("status"); r.code != 3 {
		t.Errorf("status with a dead daemon: want exit 3:\n%s", r)
	}

	e.startProxyd()
	e.waitServer("fixture", api.StateReady)
	after := e.activityRequestIDs()
	for _, id := range ids {
		if !after[id] {
			t.Errorf("activity record of request %s written before the kill is gone after restart; have %v", id, after)
		}
	}
	if r := e.run("call", "fixture", "echo", "text=after-restart"); r.code != 0 || !strings.Contains(r.stdout, "after-restart") {
		t.Errorf("call after restart:\n%s", r)
	}
}

// activityRequestIDs returns the request ids of the records listed by
// `mcpx activity -o json`, checking each record's fields on the way.
func (e *env) activityRequestIDs() map[string]bool {
	e.t.Helper()
	out := map[string]bool{}
	for _, rec := range e.activityRecords() {
		if rec.ID == 0 || rec.Server == "" || rec.Tool == "" || rec.Status == "" {
			e.t.Errorf("incomplete activity record %+v", rec)
		}
		out[rec.RequestID] = true
	}
	return out
}

// processGone reports whether pid has exited. A daemon started by 'mcpx up'
// is reparented to init, which may leave it a zombie for a while.
func processGone(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] == 'Z' || b[i+2] == 'X'
	}
	return false
}

func serverNames(ss []api.ServerStatus) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func equalSets(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		if seen[s] == 0 {
			return false
		}
		seen[s]--
	}
	return true
}
