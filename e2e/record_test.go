package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/pgtest"
	"github.com/mcpx-dev/mcpx/proxyd/activity"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// TestRecordWithoutDaemon: after proxyd is killed, activity (list, show,
// export, summary), health and auth status read its state database
// read-only and say so; on both storage engines.
func TestRecordWithoutDaemon(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			fx := startFixture(t, mcpserver.EraBoth)
			e := newEnv(t)
			if engine == "postgres" {
				e.extraEnv = append(e.extraEnv, "MCPX_STATE_DSN="+pgtest.Database(t))
			}
			e.writeConfig(fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: fixture\n    url: %s\n", fx.URL()))
			p := e.startProxyd()
			e.waitServer("fixture", api.StateReady)
			e.mustRun("call", "fixture", "echo", "text=recorded")
			if r := e.run("call", "fixture", "fail"); r.code != 4 {
				t.Fatalf("want exit 4\n%s", r)
			}
			var live []activity.Record
			e.runJSON(0, &live, "activity")
			if len(live) != 2 {
				t.Fatalf("want 2 records, got %+v", live)
			}
			// A crash: nothing is flushed or checkpointed on the way out.
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = p.wait(t, 10*time.Second)

			var recs []activity.Record
			r := e.runJSON(0, &recs, "activity")
			if len(recs) != 2 || recs[0].RequestID != live[0].RequestID || !strings.Contains(r.stderr, "proxyd is not running: reading its record from") {
				t.Errorf("activity without proxyd: want the 2 records and a note on stderr, got %+v\n%s", recs, r)
			}
			var one activity.Record
			e.runJSON(0, &one, "activity", "show", strconv.FormatInt(live[0].ID, 10))
			if one.RequestID != live[0].RequestID {
				t.Errorf("activity show without proxyd: %+v", one)
			}
			if r := e.run("activity", "show", "999999"); r.code != 8 {
				t.Errorf("activity show of no record without proxyd: want exit 8\n%s", r)
			}
			if r := e.run("activity", "export"); r.code != 0 || strings.Count(r.stdout, "\n") != 2 {
				t.Errorf("activity export without proxyd: want 2 JSON lines\n%s", r)
			}
			if r := e.run("activity", "summary", "--by", "error_class"); r.code != 0 || !strings.Contains(r.stdout, "tool_error") {
				t.Errorf("activity summary without proxyd\n%s", r)
			}
			var health []api.ServerStatus
			e.runJSON(3, &health, "health")
			if len(health) != 1 || health[0].Health == nil || health[0].Health.Calls != 1 || health[0].State != api.StateUnknown {
				t.Errorf("health without proxyd: want the replayed window (1 counted call), state unknown, exit 3: %+v", health)
			}
			var auth []api.AuthStatus
			e.runJSON(0, &auth, "auth", "status")
			if len(auth) != 1 || auth[0].SignedIn {
				t.Errorf("auth status without proxyd: %+v", auth)
			}
			// Read-only: the record did not change and proxyd starts again on it.
			p = e.startProxyd()
			var after []activity.Record
			e.runJSON(0, &after, "activity")
			if len(after) != 2 {
				t.Errorf("after a restart: want the same 2 records, got %d", len(after))
			}
			// And after a clean stop (the log checkpointed and gone).
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			_ = p.wait(t, 20*time.Second)
			e.runJSON(0, &after, "activity")
			if len(after) != 2 {
				t.Errorf("after a clean stop: want the same 2 records, got %d", len(after))
			}
		})
	}
}

// TestHealthCountsToolCallsOnly: health is a window of tool calls. The
// command line's other requests are recorded (with their method) but not
// counted, live or replayed from the record: a method the server does not
// have, asked for again and again, does not make it degraded.
func TestHealthCountsToolCallsOnly(t *testing.T) {
	fx := startFixture(t, mcpserver.EraBoth)
	e := newEnv(t)
	e.writeConfig(fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: fixture\n    url: %s\n", fx.URL()))
	p := e.startProxyd()
	e.waitServer("fixture", api.StateReady)
	for range 6 {
		if r := e.run("rpc", "fixture", "no/such-method"); r.code == 0 {
			t.Fatalf("an unknown method succeeded\n%s", r)
		}
	}
	e.mustRun("call", "fixture", "echo", "text=x")
	var recs []activity.Record
	e.runJSON(0, &recs, "activity")
	others := 0
	for _, r := range recs {
		if r.Method == "no/such-method" {
			others++
		}
	}
	if len(recs) != 7 || others != 6 {
		t.Fatalf("want 7 records, 6 with method no/such-method: %+v", recs)
	}
	check := func(code int, when string) {
		t.Helper()
		var health []api.ServerStatus
		e.runJSON(code, &health, "health", "fixture")
		if len(health) != 1 || health[0].Health == nil || health[0].Health.Calls != 1 || health[0].Health.Degraded {
			t.Errorf("%s: want 1 counted call, not degraded: %+v", when, health)
		}
	}
	check(0, "live")
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.wait(t, 10*time.Second)
	check(3, "replayed from the record")
}
