package e2e

import (
	"encoding/json"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
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
	var out syncBuffer
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
	var out, errOut syncBuffer
	follow := exec.Command(mcpxBin, append(e.globals(), "activity", "follow", "-o", "json")...)
	follow.Env, follow.Stdout, follow.Stderr = e.environ(), &out, &errOut
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var werr error
	go func() { werr = follow.Wait(); close(exited) }()
	defer func() { _ = follow.Process.Kill(); <-exited }()
	calls := 0
	waitfor.Cond(t, 30*time.Second, "a followed call in the stream", func() (bool, string) {
		if strings.Contains(out.String(), `"echo"`) {
			return true, ""
		}
		if calls < 100 {
			calls++
			e.mustRun("call", "fixture", "echo", "text=followed")
		}
		return false, out.String()
	})
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t, 15*time.Second); err != nil {
		t.Logf("proxyd: %v", err)
	}
	select {
	case <-exited:
		var ee *exec.ExitError
		if !errors.As(werr, &ee) || ee.ExitCode() != 3 || !strings.Contains(errOut.String(), "proxyd ended the stream") {
			t.Errorf("follow after proxyd stopped: %v\nstderr: %s", werr, errOut.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("follow still running 15 s after proxyd stopped")
	}
}
