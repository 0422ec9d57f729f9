package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/store"
	"github.com/mcpx-dev/mcpx/proxyd/store/storetest"
)

// process is another proxyd on the same state database: its own
// connection pool, store (lease holder) and coordinator.
func (r *rig) process(tb testing.TB, eng, loc string) *Coordinator {
	c := NewCoordinator(NewStore(storetest.OpenAt(tb, eng, loc)), CoordinatorOptions{})
	c.Sync(map[string]GrantSource{r.key: r.src})
	return c
}

// Three processes on one database, 20 callers each, at every expiry: one
// token request per expiry at an authorization server that revokes the
// grant on refresh-token reuse, and nobody fails.
func TestProcessesShareOneRefresh(t *testing.T) {
	for _, eng := range storetest.Engines {
		t.Run(eng, func(t *testing.T) {
			loc := storetest.Location(t, eng)
			r := newRig(t, rigOpts{db: storetest.OpenAt(t, eng, loc)})
			r.as.Hold(20 * time.Millisecond)
			r.login(t, false)
			coords := []*Coordinator{r.c, r.process(t, eng, loc), r.process(t, eng, loc)}
			ctx := context.Background()
			const cycles, callers = 5, 20
			for cycle := range cycles {
				if err := r.c.ExpireAccessToken(ctx, r.key); err != nil {
					t.Fatal(err)
				}
				for _, c := range coords[1:] {
					c.Forget(r.key) // they read the expired token from the store
				}
				before := r.as.TokenRequests()
				var wg sync.WaitGroup
				errs := make(chan error, len(coords)*callers)
				start := make(chan struct{})
				for _, c := range coords {
					for range callers {
						wg.Go(func() {
							<-start
							tok, err := c.Token(ctx, r.key)
							if err == nil && !r.as.Validate(tok.AccessToken) {
								err = fmt.Errorf("got a dead access token")
							}
							if err != nil {
								errs <- err
							}
						})
					}
				}
				close(start)
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Errorf("cycle %d: %v", cycle, err)
				}
				if n := r.as.TokenRequests() - before; n != 1 {
					t.Fatalf("cycle %d: %d token requests, want 1", cycle, n)
				}
			}
			if st := r.as.Stats(); st.ReuseDetected != 0 || st.RevokedGrants != 0 {
				t.Fatalf("grant burned: %+v", st)
			}
		})
	}
}

// A refresh whose request left and whose holder died before storing the
// answer is reported as interrupted, once and for all, with no request.
func TestInterruptedRefreshReported(t *testing.T) {
	for _, eng := range storetest.Engines {
		t.Run(eng, func(t *testing.T) {
			loc := storetest.Location(t, eng)
			r := newRig(t, rigOpts{db: storetest.OpenAt(t, eng, loc)})
			cur := r.login(t, true)
			ctx := context.Background()
			// The dead holder: it marked its request and never finished.
			dead := NewStore(storetest.OpenAt(t, eng, loc))
			h, err := dead.Hold(ctx, r.key)
			if err != nil {
				t.Fatal(err)
			}
			client, _ := r.store.Client(ctx, r.key)
			if err := h.MarkInFlight(ctx, fingerprint(1, cur.RefreshToken, client.ClientID)); err != nil {
				t.Fatal(err)
			}
			h.Release()

			before := r.as.TokenRequests()
			for range 2 {
				_, err := r.c.Refresh(ctx, r.key, TriggerReactive, nil)
				var re *RefreshError
				if !errors.As(err, &re) || re.Class != OutcomeInvalidGrant || !re.Terminal || !strings.Contains(re.Msg, "a refresh was interrupted") || !strings.Contains(re.Msg, "mcpx login alpha") {
					t.Fatalf("refresh after an interrupted one: %v", err)
				}
			}
			if n := r.as.TokenRequests() - before; n != 0 {
				t.Fatalf("%d token requests after an interrupted refresh, want 0", n)
			}
			// Another process sees the latch too, without a request.
			if _, err := r.process(t, eng, loc).Refresh(ctx, r.key, TriggerReactive, nil); err == nil || !strings.Contains(err.Error(), "interrupted") {
				t.Fatalf("other process: %v", err)
			}
			// A new sign-in clears it.
			r.login(t, true)
			if _, err := r.c.Refresh(ctx, r.key, TriggerReactive, nil); err != nil {
				t.Fatalf("refresh after a new sign-in: %v", err)
			}
		})
	}
}

// A holder killed before its request left hands over at once: on
// PostgreSQL the server ends its transaction; on SQLite the lease of a
// process that no longer runs is taken without waiting for it to expire.
func TestDeadHolderHandsOver(t *testing.T) {
	r := newRig(t, rigOpts{})
	r.login(t, true)
	ctx := context.Background()
	if _, err := r.store.db.ExecContext(ctx, `INSERT INTO oauth_leases (server_key, holder, expires) VALUES (?, ?, ?)`,
		r.key, fmt.Sprintf("%s:%d:dead", hostName, 1<<22), time.Now().Add(time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := r.c.Refresh(rctx, r.key, TriggerReactive, nil); err != nil {
		t.Fatalf("refresh with a dead holder's lease: %v", err)
	}
	// A live holder's lease is waited for.
	if _, err := r.store.db.ExecContext(ctx, `INSERT INTO oauth_leases (server_key, holder, expires) VALUES (?, ?, ?)`,
		r.key, "elsewhere:1:x", time.Now().Add(time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	short, cancel2 := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel2()
	if _, err := r.store.Hold(short, r.key); err == nil {
		t.Fatal("took a live holder's lease")
	}
}

// BenchmarkRefreshStormReplicas: three processes on one PostgreSQL
// database (each with its own connection pool, store and coordinator),
// 1,000 callers each on an expired token, a token endpoint that takes
// 50 ms: one token request, and the last caller served how long after the
// token response.
func BenchmarkRefreshStormReplicas(b *testing.B) {
	const hold = 50 * time.Millisecond
	var overs []time.Duration
	for range b.N {
		b.StopTimer()
		eng := os.Getenv("STORM_ENGINE")
		if eng == "" {
			eng = store.EnginePostgres
		}
		loc := storetest.Location(b, eng)
		var endpoint atomic.Int64
		r := newRig(b, rigOpts{db: storetest.OpenAt(b, eng, loc)})
		r.as.Hold(hold)
		old := r.login(b, true)
		tokenURL := r.as.URL() + "/token"
		timed := &http.Client{Transport: timingTransport{next: http.DefaultTransport, d: &endpoint}}
		r.src = GrantSource{Server: "alpha", Resource: r.resource, HTTPClient: timed,
			TokenEndpoint: func(context.Context) (string, error) { return tokenURL, nil }}
		r.c.Sync(map[string]GrantSource{r.key: r.src})
		coords := []*Coordinator{r.c, r.process(b, eng, loc), r.process(b, eng, loc)}
		overs = append(overs, storm(b, r, old, &endpoint, coords...))
	}
	reportOvers(b, overs)
}
