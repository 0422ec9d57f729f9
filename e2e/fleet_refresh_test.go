package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/pgtest"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/store"
)

// fleetRuns says how many drill cycles and holder kills a fleet test
// makes: a short run in 'make test', the full one with MCPX_FLEET_LONG=1
// ('make fleet-drill').
func fleetRuns() (cycles, kills int) {
	if os.Getenv("MCPX_FLEET_LONG") == "1" {
		return 20, 5
	}
	return 3, 2
}

// fleet is n proxyd processes sharing one state: a PostgreSQL database, or
// one SQLite state dir.
type fleet struct {
	t      *testing.T
	engine string
	dsn    string // postgres
	reps   []*oauthEnv
}

func startFleet(t *testing.T, engine string, n int, body string) *fleet {
	f := &fleet{t: t, engine: engine}
	if engine == "postgres" {
		f.dsn = pgtest.Database(t)
		f.reps = replicaEnvs(t, n, f.dsn, body)
		return f
	}
	for i := range n {
		e := newOAuthEnv(t)
		if i > 0 {
			e.StateDir = f.reps[0].StateDir // one SQLite file for all
		}
		e.extraEnv = append(e.extraEnv, fmt.Sprintf("MCPX_REPLICA=r%d", i))
		e.writeConfig(body)
		e.up()
		f.reps = append(f.reps, e)
	}
	return f
}

// holderPID is the pid of the proxyd holding the grant's refresh, or 0.
func (f *fleet) holderPID() int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if f.engine == "postgres" {
		conn, err := pgx.Connect(ctx, f.dsn)
		if err != nil {
			f.t.Fatal(err)
		}
		defer conn.Close(ctx)
		var app string
		err = conn.QueryRow(ctx, `SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory' AND l.classid = 2 AND l.granted LIMIT 1`).Scan(&app)
		if err != nil {
			return 0
		}
		for i, e := range f.reps {
			if app == fmt.Sprintf("mcpx-proxyd r%d", i) {
				return e.status().PID
			}
		}
		return 0
	}
	db, err := sql.Open("sqlite", filepath.Join(f.reps[0].StateDir, "state.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		f.t.Fatal(err)
	}
	defer db.Close()
	var holder string
	if db.QueryRowContext(ctx, `SELECT holder FROM oauth_leases LIMIT 1`).Scan(&holder) != nil {
		return 0
	}
	parts := strings.Split(holder, ":")
	if len(parts) < 3 {
		return 0
	}
	pid, _ := strconv.Atoi(parts[len(parts)-2])
	return pid
}

// drill starts `mcpx drill refresh` on replica 0 with the others joining.
func (f *fleet) drill(callers int) *exec.Cmd {
	var socks []string
	for _, e := range f.reps[1:] {
		socks = append(socks, e.Socket)
	}
	args := append(f.reps[0].globals(), "drill", "refresh", "oidc", "--callers", strconv.Itoa(callers), "--replicas", strings.Join(socks, ","), "-o", "json")
	cmd := exec.Command(mcpxBin, args...)
	cmd.Env = f.reps[0].environ()
	return cmd
}

// The refresh drill on every replica at once against node-oidc-provider,
// which revokes the grant when a refresh token is used twice: exactly one
// token request per expiry, no revocation; then the flight holder SIGKILLed
// at a random moment: a kill before the request left or after the answer
// was stored costs nothing, one inside the window is reported as an
// interrupted refresh. Three replicas on PostgreSQL, two proxyd on one
// SQLite state dir.
func TestFleetRefreshDrill(t *testing.T) {
	for _, tc := range []struct {
		engine   string
		replicas int
	}{{"postgres", 3}, {"sqlite", 2}} {
		t.Run(tc.engine, func(t *testing.T) {
			p := startOIDCProvider(t)
			mcp, err := mcpserver.Start(mcpserver.Options{Era: mcpserver.EraModern, ValidateToken: p.active,
				AuthorizationServers: []string{p.issuer}, Scopes: []string{"read"}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = mcp.Close() })
			f := startFleet(t, tc.engine, tc.replicas, oauthConfig("oidc", mcp.URL(), ""))
			login := func() {
				var lr api.LoginResult
				f.reps[0].runJSON(0, &lr, "login", "oidc", "--timeout", "30s")
				// Every replica works with the new grant. One whose recent
				// calls failed on the lost grant reports degraded (its call
				// window remembers them) until enough calls succeed, so a
				// call succeeding is the proof, not the state.
				for i, e := range f.reps {
					waitFor(t, fmt.Sprintf("replica %d to call with the new grant", i), func() (bool, string) {
						r := e.run("call", "oidc", "echo", "text=after-login")
						return r.code == 0, r.String()
					})
				}
			}
			login()
			stats := func() (int, int) {
				st, err := p.Stats()
				if err != nil {
					t.Fatal(err)
				}
				return st.TokenRequests, st.RevokedGrants
			}

			cycles, kills := fleetRuns()
			const callers = 50
			for cycle := range cycles {
				before, _ := stats()
				out, err := f.drill(callers).Output()
				var rep api.RefreshDrillReport
				if err != nil || json.Unmarshal(out, &rep) != nil {
					t.Fatalf("cycle %d: drill: %v\n%s", cycle, err, out)
				}
				if rep.TokenRequests != 1 || rep.Failed != 0 || rep.Succeeded != callers*tc.replicas || len(rep.Replicas) != tc.replicas || rep.Verdict != api.VerdictPass {
					t.Fatalf("cycle %d: drill report %+v", cycle, rep)
				}
				after, revoked := stats()
				// The drill's expiry and its follow-up check: one request each.
				if after-before != 2 || revoked != 0 {
					t.Fatalf("cycle %d: the provider saw %d token requests (want 2) and %d revocations (want 0)", cycle, after-before, revoked)
				}
			}
			t.Logf("%s: %d cycles x %d replicas x %d callers: one token request per expiry, 0 revocations", tc.engine, cycles, tc.replicas, callers)

			// The holder killed at a random moment of its flight.
			if err := p.Hold(150 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
			inWindow, outside := 0, 0
			for k := range kills {
				cmd := f.drill(callers)
				var buf bytes.Buffer
				cmd.Stdout, cmd.Stderr = &buf, &buf
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				pid := 0
				waitFor(t, "a refresh holder", func() (bool, string) {
					pid = f.holderPID()
					return pid != 0, ""
				})
				// A random moment within the flight (the provider holds
				// each token request 150 ms).
				timer := time.NewTimer(time.Duration(rand.IntN(300)) * time.Millisecond)
				<-timer.C
				if now := f.holderPID(); now != 0 {
					pid = now
				}
				victim := -1
				for i, e := range f.reps {
					if e.status().PID == pid {
						victim = i
					}
				}
				if victim < 0 {
					t.Fatalf("kill %d: holder pid %d is no replica", k, pid)
				}
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				_ = cmd.Wait() // a replica died under it: the drill's own verdict is moot
				waitFor(t, "the killed replica's socket to refuse connections", func() (bool, string) {
					c, err := net.Dial("unix", f.reps[victim].Socket)
					if err == nil {
						c.Close()
					}
					return err != nil && !store.ProcessAlive(pid), fmt.Sprint(err)
				})
				if r := f.reps[victim].run("up", "--log-level", "debug"); r.code != 0 {
					t.Fatalf("kill %d: restarting replica %d: %s", k, victim, r)
				}
				// Every replica recovers a working token within its retry
				// budget, or every one reports the interrupted refresh.
				interrupted := 0
				var seen []string
				for i, e := range f.reps {
					var last result
					waitFor(t, fmt.Sprintf("replica %d to call or report the interrupted refresh", i), func() (bool, string) {
						last = e.run("call", "oidc", "echo", "text=after-kill")
						return last.code == 0 || strings.Contains(last.stdout+last.stderr, "a refresh was interrupted"), last.String()
					})
					seen = append(seen, fmt.Sprintf("replica %d: exit %d %s", i, last.code, strings.TrimSpace(last.stderr)))
					if last.code != 0 {
						interrupted++
						reqs, _ := stats()
						e.run("call", "oidc", "echo", "text=again")
						if now, _ := stats(); now != reqs {
							t.Errorf("kill %d: replica %d sent %d token requests after an interrupted refresh", k, i, now-reqs)
						}
					}
				}
				_, revoked := stats()
				if revoked != 0 {
					t.Fatalf("kill %d: %d grants revoked", k, revoked)
				}
				// A replica still holding an unexpired access token works
				// on until it needs a refresh; the others report.
				t.Logf("kill %d (replica %d, the holder):\n%s", k, victim, strings.Join(seen, "\n"))
				if interrupted == 0 {
					outside++
				} else {
					inWindow++
					login() // the grant's refresh token is lost: sign in again
				}
			}
			t.Logf("%s: %d holder kills: %d inside the window (request sent, answer not stored: reported as an interrupted refresh), %d before the request or after the store (no cost, every replica recovered); 0 revocations",
				tc.engine, kills, inWindow, outside)
		})
	}
}
