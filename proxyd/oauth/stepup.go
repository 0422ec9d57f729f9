package oauth

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/mcpx-dev/mcpx/internal/discovery"
)

// TokenEndpointFrom returns a GrantSource.TokenEndpoint that discovers the
// token endpoint of serverURL through d (cached there), honouring the
// overrides.
func TokenEndpointFrom(d *discovery.Discoverer, serverURL string, ov discovery.Overrides) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		res, err := d.Discover(ctx, serverURL, nil, ov, nil)
		if err != nil {
			return "", fmt.Errorf("discover the token endpoint: %w", err)
		}
		return res.Metadata.TokenEndpoint, nil
	}
}

// stepUpState is the scope step-up of one server. attempts counts the
// step-up sign-ins for the challenged scopes; it starts again only when a
// challenge names a scope not asked for before, so a server that keeps
// refusing the same scopes meets the limit even though some requests
// (initialize) succeed in between.
type stepUpState struct {
	challenged []string
	attempts   int
	satisfied  bool // a request succeeded since the last challenge
}

// noteInsufficientScope records a 403 insufficient_scope challenge.
func (c *Coordinator) noteInsufficientScope(key string, ch *discovery.Challenge) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.keys[key]
	if !ok {
		return
	}
	if st.stepUp == nil {
		st.stepUp = &stepUpState{}
	}
	st.stepUp.satisfied = false
	for _, s := range strings.Fields(ch.Scope) {
		if !slices.Contains(st.stepUp.challenged, s) {
			st.stepUp.challenged = append(st.stepUp.challenged, s)
			st.stepUp.attempts = 0 // a new need, not a repeated refusal
		}
	}
}

// PendingStepUp returns the scopes the next sign-in of key should request
// after an upstream answered 403 insufficient_scope: the union of the
// granted and the challenged scopes. ok is false when no step-up is
// pending; ErrStepUpLimit after MaxStepUpAttempts sign-ins (the first
// included) did not help.
func (c *Coordinator) PendingStepUp(ctx context.Context, key string) (scopes []string, ok bool, err error) {
	c.mu.Lock()
	st, found := c.keys[key]
	var su stepUpState
	if found && st.stepUp != nil {
		su = *st.stepUp
	}
	if found && su.satisfied {
		// The last step-up worked: this is an ordinary sign-in, and a
		// later refusal starts a new budget.
		st.stepUp = nil
	}
	c.mu.Unlock()
	if len(su.challenged) == 0 || su.satisfied {
		return nil, false, nil
	}
	// The sign-in that obtained the refused token was the first attempt:
	// at most MaxStepUpAttempts authorization requests in all.
	if su.attempts >= MaxStepUpAttempts-1 {
		return nil, true, fmt.Errorf("%w: %d sign-ins did not grant %s", ErrStepUpLimit, su.attempts+1, strings.Join(su.challenged, " "))
	}
	var granted []string
	if t, terr := c.store.Token(ctx, key); terr == nil {
		granted = t.Scopes
	}
	c.mu.Lock()
	if st.stepUp != nil {
		st.stepUp.attempts++
	}
	c.mu.Unlock()
	return StepUpScopes(granted, su.challenged), true, nil
}

// stepUpAwaiting reports a step-up sign-in not yet shown to work.
func (c *Coordinator) stepUpAwaiting(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.keys[key]
	return ok && st.stepUp != nil && st.stepUp.attempts > 0 && !st.stepUp.satisfied
}

// stepUpSucceeded notes a request authorized after a step-up sign-in: no
// step-up is pending until the next insufficient_scope challenge.
func (c *Coordinator) stepUpSucceeded(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.keys[key]; ok && st.stepUp != nil && st.stepUp.attempts > 0 {
		st.stepUp.satisfied = true
	}
}
