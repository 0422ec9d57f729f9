package drill

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// MaxCallers bounds the refresh drill.
const MaxCallers = 1000

// RefreshTarget is a signed-in server's grant and connection, as the
// refresh drill uses them.
type RefreshTarget interface {
	Name() string
	// ExpireAccessToken marks the stored access token expired, keeping
	// the grant (the refresh token, or a machine grant's credentials).
	ExpireAccessToken(ctx context.Context) error
	// TokenRequests counts the token requests (refreshes, or a machine
	// grant's new tokens) sent for the grant so far.
	TokenRequests() int64
	// RefreshProactively runs the refresher's refresh of the grant.
	RefreshProactively(ctx context.Context) error
	// Call is one upstream request that needs the access token.
	Call(ctx context.Context) error
	// Forget drops the token cached in this process, so the next call
	// reads what the store holds.
	Forget()
}

// RefreshOptions configure a refresh drill.
type RefreshOptions struct {
	Callers int
	// At, when set, is when the callers fire, so that the replicas sharing
	// a state database fire together (up to 10 s ahead).
	At time.Time
	// Join: another replica expires the token and checks the grant
	// afterwards; this one only fires its callers at At.
	Join bool
	// Replica names this proxyd in the report.
	Replica string
	// Progress receives human-readable progress lines.
	Progress func(string)
}

// Refresh simulates concurrent refresh at expiry: the access token is
// marked expired (the refresh token kept), Callers concurrent upstream
// requests and one proactive refresh race for it, and the report counts
// the token requests that went out (1 is the only right answer), the calls
// that succeeded, and whether the grant still works afterwards.
func Refresh(ctx context.Context, t RefreshTarget, o RefreshOptions) (api.RefreshDrillReport, error) {
	progress := o.Progress
	if progress == nil {
		progress = func(string) {}
	}
	rep := api.RefreshDrillReport{DrillOutcome: api.DrillOutcome{Server: t.Name()}, Replica: o.Replica, Callers: o.Callers}
	if o.Callers < 1 || o.Callers > MaxCallers {
		return rep, fmt.Errorf("callers must be between 1 and %d", MaxCallers)
	}
	// Counted from before the expiry: the proactive refresher may be the
	// one that serves it.
	before := t.TokenRequests()
	if !o.Join {
		if err := t.ExpireAccessToken(ctx); err != nil {
			return rep, err
		}
		progress(fmt.Sprintf("marked the access token of %s expired (its grant kept)", t.Name()))
	}
	if wait := time.Until(o.At); !o.At.IsZero() && wait > 0 && wait < 10*time.Second {
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return rep, ctx.Err()
		}
	}
	if o.Join {
		t.Forget() // fire on what the store holds: the expired token
	}
	progress(fmt.Sprintf("firing %d concurrent upstream requests and one proactive refresh", o.Callers))

	lat := make([]time.Duration, o.Callers)
	errs := make([]error, o.Callers)
	var proactiveErr error
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range o.Callers {
		wg.Go(func() {
			<-start
			t0 := time.Now()
			errs[i] = t.Call(ctx)
			lat[i] = time.Since(t0)
		})
	}
	wg.Go(func() {
		<-start
		proactiveErr = t.RefreshProactively(ctx)
	})
	close(start)
	wg.Wait()
	rep.TokenRequests = t.TokenRequests() - before
	var firstErr error
	for _, e := range errs {
		if e == nil {
			rep.Succeeded++
			continue
		}
		rep.Failed++
		if firstErr == nil {
			firstErr = e
		}
	}
	if proactiveErr != nil {
		rep.Notes = append(rep.Notes, "proactive refresh: "+redact.Text(proactiveErr.Error()))
	}
	if firstErr != nil {
		rep.Notes = append(rep.Notes, "first failed call: "+redact.Text(firstErr.Error()))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	rep.P50MS = ms(lat[len(lat)/2])
	rep.P99MS = ms(lat[(len(lat)*99)/100])
	progress(fmt.Sprintf("%d token request(s) sent; %d of %d calls succeeded", rep.TokenRequests, rep.Succeeded, o.Callers))

	// The grant must still work: a fresh refresh and a call afterwards
	// (by the replica that started a drill on several).
	if o.Join {
		rep.GrantIntact = rep.Failed == 0
	} else {
		progress("checking that the grant still works")
		if err := t.ExpireAccessToken(ctx); err == nil {
			before := t.TokenRequests()
			err := t.Call(ctx)
			rep.GrantIntact = err == nil && t.TokenRequests()-before == 1
			if err != nil {
				rep.Notes = append(rep.Notes, "follow-up call after a second refresh failed: "+redact.Text(err.Error()))
			}
		}
	}
	rep.Verdict = api.VerdictPass
	if !o.At.IsZero() {
		// Part of a drill on several replicas: its caller judges the
		// token requests across all of them.
		if rep.Failed != 0 || !rep.GrantIntact {
			rep.Verdict = api.VerdictFail
		}
		return rep, nil
	}
	if rep.TokenRequests != 1 || rep.Failed != 0 || !rep.GrantIntact {
		rep.Verdict = api.VerdictFail
		if rep.TokenRequests > 1 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%d token requests for one expiry: a refresh race (an authorization server with reuse detection revokes the grant)", rep.TokenRequests))
		}
		if rep.TokenRequests == 0 {
			rep.Notes = append(rep.Notes, "no token request went out: the refresh did not run")
		}
	}
	return rep, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
