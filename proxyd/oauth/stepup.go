package oauth

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/mcpx-dev/mcpx/proxyd/oauth/discovery"
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

type stepUpState struct {
	challenged []string
	attempts   int
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
	for _, s := range strings.Fields(ch.Scope) {
		if !slices.Contains(st.stepUp.challenged, s) {
			st.stepUp.challenged = append(st.stepUp.challenged, s)
		}
	}
}

// PendingStepUp returns the scopes the next sign-in of key should request
// after an upstream answered 403 insufficient_scope: the union of the
// granted and the challenged scopes. ok is false when no step-up is
// pending; ErrStepUpLimit after MaxStepUpAttempts sign-ins did not help.
func (c *Coordinator) PendingStepUp(ctx context.Context, key string) (scopes []string, ok bool, err error) {
	c.mu.Lock()
	st, found := c.keys[key]
	var su stepUpState
	if found && st.stepUp != nil {
		su = *st.stepUp
	}
	c.mu.Unlock()
	if len(su.challenged) == 0 {
		return nil, false, nil
	}
	if su.attempts >= MaxStepUpAttempts {
		return nil, true, fmt.Errorf("%w: %d sign-ins did not grant %s", ErrStepUpLimit, su.attempts, strings.Join(su.challenged, " "))
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

// stepUpSucceeded forgets a pending step-up once a call is authorized.
func (c *Coordinator) stepUpSucceeded(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.keys[key]; ok && st.stepUp != nil && st.stepUp.attempts > 0 {
		st.stepUp = nil
	}
}
