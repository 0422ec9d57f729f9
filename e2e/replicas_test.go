package e2e

import (
	"fmt"
	"maps"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/pgtest"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/proxyd/activity"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// asReplica makes e replica r<i> on the state database named by dsn (by
// a ${env:...} reference in the config), serving the config body.
func asReplica(e *env, i int, dsn, body string) {
	e.extraEnv = append(e.extraEnv, "MCPX_TEST_STATE_DSN="+dsn, fmt.Sprintf("MCPX_REPLICA=r%d", i))
	e.writeConfig("state: {postgres: \"${env:MCPX_TEST_STATE_DSN}\"}\n" + body)
}

// replicaEnvs starts n proxyd replicas, each with its own socket, state dir
// and listen address, sharing the state database named by dsn (by a
// ${env:...} reference in the config) and serving the config body.
func replicaEnvs(t *testing.T, n int, dsn, body string) []*oauthEnv {
	t.Helper()
	var out []*oauthEnv
	for i := range n {
		e := newOAuthEnv(t)
		asReplica(e.env, i, dsn, body)
		e.up()
		out = append(out, e)
	}
	return out
}

// Two replicas on one PostgreSQL database: a sign-in on one is used by
// the other, and activity and health read across both.
func TestReplicasSharePostgres(t *testing.T) {
	dsn := pgtest.Database(t)
	fx := startAuthFixture(t, "--era", "modern")
	reps := replicaEnvs(t, 2, dsn, oauthConfig("docs", fx.MCP, ""))
	a, b := reps[0], reps[1]

	st := a.status()
	if st.Replica != "r0" || !strings.HasPrefix(st.StateDB, "postgres:postgres://") {
		t.Errorf("status replica %q state %q", st.Replica, st.StateDB)
	}
	a.mustRun("login", "docs")
	a.waitReady("docs")
	b.waitReady("docs") // the other replica's sign-in, picked up from the store
	if s := fx.stats(t); s.Registrations != 1 || s.CodeExchanges != 1 {
		t.Errorf("fixture stats %+v: want one registration and one sign-in for both replicas", s)
	}
	for _, e := range reps {
		if r := e.mustRun("call", "docs", "echo", "text=hello"); !strings.Contains(r.stdout, "hello") {
			t.Fatalf("call: %s", r)
		}
	}

	waitFor(t, "both replicas' calls in the activity of r0", func() (bool, string) {
		var recs []activity.Record
		a.runJSON(0, &recs, "activity", "--tool", "echo", "-o", "json")
		seen := map[string]int{}
		for _, r := range recs {
			seen[r.Replica]++
		}
		return seen["r0"] == 1 && seen["r1"] == 1, fmt.Sprint(seen)
	})
	var recs []activity.Record
	a.runJSON(0, &recs, "activity", "--replica", "r1", "-o", "json")
	if len(recs) != 1 || recs[0].Replica != "r1" || recs[0].Tool != "echo" {
		t.Errorf("--replica r1 from r0: %+v", recs)
	}

	waitFor(t, "health of both replicas from r1", func() (bool, string) {
		var hs []api.ServerStatus
		b.runJSON(0, &hs, "health", "-o", "json")
		got := map[string]api.State{}
		for _, h := range hs {
			got[h.Replica] = h.State
		}
		return len(hs) == 2 && got["r0"] == api.StateReady && got["r1"] == api.StateReady, fmt.Sprint(got)
	})
	r := b.mustRun("health", "--replica", "r0")
	if !strings.Contains(r.stdout, "docs") || strings.Contains(r.stdout, "r1") {
		t.Errorf("health --replica r0:\n%s", r)
	}
	r = b.mustRun("health")
	if !strings.Contains(r.stdout, "REPLICA") {
		t.Errorf("health of two replicas has no REPLICA column:\n%s", r)
	}

	// With both down, health is read from the record (exit 3): each
	// replica's calls as a row of its own, of the replicas named if any
	// (one named with no calls: its row, empty).
	a.mustRun("down")
	b.mustRun("down")
	for _, c := range []struct {
		replicas []string
		calls    map[string]int
	}{
		{nil, map[string]int{"r0": 1, "r1": 1}},
		{[]string{"--replica", "r1"}, map[string]int{"r1": 1}},
		{[]string{"--replica", "r0,r1"}, map[string]int{"r0": 1, "r1": 1}},
		{[]string{"--replica", "r9"}, map[string]int{"r9": 0}},
	} {
		var hs []api.ServerStatus
		b.runJSON(3, &hs, append([]string{"health"}, c.replicas...)...)
		got := map[string]int{}
		for _, h := range hs {
			if h.Name != "docs" || h.Health == nil {
				t.Errorf("offline health %v: row %+v", c.replicas, h)
				continue
			}
			got[h.Replica] += h.Health.Calls
		}
		if len(hs) != len(c.calls) || !maps.Equal(got, c.calls) {
			t.Errorf("offline health %v: %+v, want calls by replica %v", c.replicas, hs, c.calls)
		}
	}
	if r := b.run("health"); r.code != 3 || !strings.Contains(r.stdout, "REPLICA") || !strings.Contains(r.stdout, "r1") {
		t.Errorf("offline health of two replicas: want exit 3 and a REPLICA column:\n%s", r)
	}
}

// replicaFixtureEnvs starts n replicas of proxyd on one PostgreSQL
// database, each serving one fixture.
func replicaFixtureEnvs(t *testing.T, n int) ([]*env, []*proxydProc) {
	t.Helper()
	dsn := pgtest.Database(t)
	fx := startFixture(t, mcpserver.EraBoth)
	var reps []*env
	var procs []*proxydProc
	for i := range n {
		e := newEnv(t)
		asReplica(e, i, dsn, fixtureConfig(fx.URL(), "auto"))
		procs = append(procs, e.startProxyd())
		e.waitServer("fixture", api.StateReady)
		reps = append(reps, e)
	}
	return reps, procs
}

// mcpx top shows the calls of the proxyd it asks: its window's records
// read from a shared record are that replica's, as its live stream is.
func TestTopKeepsToItsReplica(t *testing.T) {
	reps, _ := replicaFixtureEnvs(t, 2)
	a, b := reps[0], reps[1]
	if r := b.run("call", "fixture", "fail"); r.code != 4 {
		t.Fatalf("the failing tool on r1: %s", r)
	}
	a.mustRun("call", "fixture", "echo", "text=r0")
	waitFor(t, "both calls in the record", func() (bool, string) {
		var recs []activity.Record
		a.runJSON(0, &recs, "activity", "-o", "json")
		return len(recs) == 2, fmt.Sprint(recs)
	})
	r := a.mustRun("top", "--count", "1")
	if !regexp.MustCompile(`fixture +ready +0\.\d\d +0\.0%`).MatchString(r.stdout) {
		t.Errorf("top on r0 counts r1's failed call (want r0's call alone, no failures):\n%s", r)
	}
	// A server's failures view (enter) lists r0's failed call, not r1's.
	if r := a.run("call", "fixture", "fail"); r.code != 4 {
		t.Fatalf("the failing tool on r0: %s", r)
	}
	term := newTerminal(t, "replica", a.shellCommand([]string{"TERM=xterm-256color"}, "top", "--interval", "200ms"))
	term.waitScreen("r0's failure", "fixture", "tool_error 1", "50.0%")
	term.keys("Enter")
	if s := term.waitScreen("r0's failures", "recent failures of fixture", "records"); !strings.Contains(s, "· 1 records") {
		t.Errorf("r0's failures view (want its one failed call):\n%s", s)
	}
	term.keys("q")
	term.waitScreen("top to quit", "EXIT 0")
}

// A follow streams the calls of the proxyd it follows. After a restart,
// its read of what ended in between takes that proxyd's calls only: not
// another replica's on the same database, which the live stream never
// showed and whose ids can commit out of order with this one's.
func TestFollowRetryKeepsToItsReplica(t *testing.T) {
	// Without --replica the follow learns its proxyd's replica per
	// stream; with it, the first stream's comes from the flag's check.
	for _, flags := range [][]string{nil, {"--replica", "r0"}} {
		t.Run(strings.Join(append([]string{"follow"}, flags...), " "), func(t *testing.T) {
			reps, procs := replicaFixtureEnvs(t, 2)
			a, b := reps[0], reps[1]
			f := startFollow(t, a, append([]string{"-o", "json", "--retry"}, flags...)...)
			f.waitCall(t, a)
			b.mustRun("call", "fixture", "add", "a=1", "b=2") // r1's, the stream open
			// r0 restarts under the follow; both replicas call meanwhile.
			f.restartHeld(t, a, procs[0], func() { b.mustRun("call", "fixture", "add", "a=2", "b=3") })
			a.mustRun("call", "fixture", "add", "a=1", "b=1") // live, on r0
			waitfor.Cond(t, 15*time.Second, "r0's call in between, then its live one", func() (bool, string) {
				recs := f.records(t)
				var tools []string
				for _, r := range recs {
					tools = append(tools, r.Replica+":"+r.Tool)
				}
				n := len(tools)
				return n >= 2 && tools[n-2] == "r0:fail" && tools[n-1] == "r0:add", strings.Join(tools, " ") + "\n" + f.errOut.String()
			})
			for _, r := range f.records(t) {
				if r.Replica != "r0" {
					t.Errorf("the follow of r0 showed %s's call %d (%s)", r.Replica, r.ID, r.Tool)
				}
			}
		})
	}
}
