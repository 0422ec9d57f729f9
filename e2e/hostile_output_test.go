package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// stateFiles returns the bytes of every file in the state directory (the
// database, its WAL, the log).
func (e *env) stateFiles() map[string]string {
	e.t.Helper()
	out := map[string]string{}
	ents, err := os.ReadDir(e.StateDir)
	if err != nil {
		e.t.Fatalf("reading the state dir: %v", err)
	}
	for _, ent := range ents {
		if b, err := os.ReadFile(filepath.Join(e.StateDir, ent.Name())); err == nil {
			out[ent.Name()] = string(b)
		}
	}
	return out
}

// The values of a stdio server's env are secrets: a child that prints its
// environment on stderr puts them in no status, call error, activity
// record (list, show, CSV, JSON), log line or database page.
func TestStdioEnvValuesNeverShown(t *testing.T) {
	t.Parallel()
	const canary = "canary-env-value-7f3a9c51"
	e := newEnv(t)
	e.writeConfig(`listen: 127.0.0.1:0
servers:
  - name: leaky
    command: /bin/sh
    args: ["-c", "echo \"starting with LEAKY_TOKEN=$LEAKY_TOKEN\" >&2; exit 3"]
    env: {LEAKY_TOKEN: ` + canary + `, LOG_LEVEL: warn}
`)
	p := e.startProxyd()
	st := e.waitServer("leaky", api.StateError)
	if !strings.Contains(st.LastError, "starting with LEAKY_TOKEN=") {
		t.Fatalf("the child's stderr is not in its status: %q", st.LastError)
	}
	e.status()
	e.run("status")
	if r := e.run("call", "leaky", "anything"); r.code == 0 {
		t.Fatalf("a call to a dead server succeeded:\n%s", r)
	}
	recs := e.activityRecords()
	if len(recs) == 0 {
		t.Fatal("the failed call was not recorded")
	}
	e.run("activity")
	e.run("activity", "show", strconv.FormatInt(recs[0].ID, 10))
	e.run("activity", "export", "--format", "csv")
	e.run("activity", "export", "--format", "jsonl")
	e.stopAll()

	outputs := append(append([]string(nil), e.outputs...), p.stderr.String())
	for i, out := range outputs {
		if strings.Contains(out, canary) {
			t.Errorf("output #%d holds the env value:\n%s", i, out)
		}
	}
	for name, b := range e.stateFiles() {
		if strings.Contains(b, canary) {
			t.Errorf("state file %s holds the env value", name)
		}
	}
	// Values too short and plain to be credentials stay readable.
	if !strings.Contains(strings.Join(outputs, "\n"), "LEAKY_TOKEN=[REDACTED]") {
		t.Errorf("the redacted stderr line is not shown at all")
	}
}

// A tool name with terminal escapes (here a downstream client's call to a
// tool that does not exist, stored as asked) is printed stripped by every
// human output and escaped in JSON.
func TestTerminalEscapesStrippedInHumanOutput(t *testing.T) {
	t.Parallel()
	fx := startFixture(t, mcpserver.EraLegacy)
	e := newEnv(t)
	e.writeConfig(fixtureConfig(fx.URL(), "legacy"))
	e.startProxyd()
	e.waitServer("fixture", api.StateReady)
	ci := e.connectInfo()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`
	resp, _ := mcpPost(t, ci, "", strings.NewReader(init), int64(len(init)))
	sid := resp.Header.Get("Mcp-Session-Id")
	evil := `\u001b]0;pwned\u0007fixture__echo\u001b[2J\u009b31m`
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"%s","arguments":{}}}`, evil)
	mcpPost(t, ci, sid, strings.NewReader(body), int64(len(body)))

	e.waitFor("the refused call in the activity log", func() (bool, string) {
		recs := e.activityRecords()
		return len(recs) > 0, fmt.Sprint(recs)
	})
	recs := e.activityRecords()
	id := strconv.FormatInt(recs[0].ID, 10)
	if !strings.Contains(recs[0].Tool, "\x1b") {
		t.Fatalf("the record lost the name as asked (%q): nothing left to test", recs[0].Tool)
	}
	for _, args := range [][]string{{"activity"}, {"activity", "show", id}, {"activity", "export", "--format", "csv"}, {"activity", "summary"}} {
		r := e.mustRun(args...)
		if strings.ContainsAny(r.stdout, "\x1b\x07\u009b") {
			t.Errorf("mcpx %s prints terminal control characters:\n%q", strings.Join(args, " "), r.stdout)
		}
		if !strings.Contains(r.stdout, "fixture__echo") && args[1] != "summary" {
			t.Errorf("mcpx %s lost the printable part of the name:\n%s", strings.Join(args, " "), r.stdout)
		}
	}
	for _, args := range [][]string{{"activity", "-o", "json"}, {"activity", "show", id, "-o", "json"}, {"activity", "export", "--format", "jsonl"}} {
		r := e.mustRun(args...)
		if strings.ContainsAny(r.stdout, "\x1b\x07") || !strings.Contains(r.stdout, `\u001b`) {
			t.Errorf("mcpx %s: want the escapes escaped, got:\n%q", strings.Join(args, " "), r.stdout)
		}
	}
}
