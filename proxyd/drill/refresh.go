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
}

// RefreshOptions configure a refresh drill.
type RefreshOptions struct {
	Callers int
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
	rep := api.RefreshDrillReport{DrillOutcome: api.DrillOutcome{Server: t.Name()}, Callers: o.Callers}
	if o.Callers < 1 || o.Callers > MaxCallers {
		return rep, fmt.Errorf("callers must be between 1 and %d", MaxCallers)
	}
	if err := t.ExpireAccessToken(ctx); err != nil {
		return rep, err
	}
	progress(fmt.Sprintf("marked the access token of %s expired (its grant kept)", t.Name()))
	before := t.TokenRequests()
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

	// The grant must still work: a fresh refresh and a call afterwards.
	progress("checking that the grant still works")
	if err := t.ExpireAccessToken(ctx); err == nil {
		before := t.TokenRequests()
		err := t.Call(ctx)
		rep.GrantIntact = err == nil && t.TokenRequests()-before == 1
		if err != nil {
			rep.Notes = append(rep.Notes, "follow-up call after a second refresh failed: "+redact.Text(err.Error()))
		}
	}
	rep.Verdict = api.VerdictPass
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
