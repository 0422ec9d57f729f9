package upstream

import (
	"context"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// An attempt running when the wait begins (started without the sign-in's
// token) does not end the wait; the next one does, and a waiter blocked
// on it is woken.
func TestAttemptsWaitSkipsTheAttemptInFlight(t *testing.T) {
	var a attempts
	a.begin() // in flight before the sign-in
	after := a.started
	a.end()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.wait(cancelled, after); err == nil {
		t.Fatal("the attempt already running when the wait began ended it")
	}
	done := make(chan error, 1)
	go func() { done <- a.wait(context.Background(), after) }()
	a.begin()
	a.end()
	if err := <-done; err != nil {
		t.Fatalf("wait: %v", err)
	}
}

// ReconnectWait returns the state the new attempt left: a failed attempt
// reads as an error with its reason, never as still connecting, so that a
// sign-in reports why the server did not come up.
func TestReconnectWaitReadsTheFailedAttempt(t *testing.T) {
	c, _ := unreachable(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 20 {
		st, err := c.ReconnectWait(ctx)
		if err != nil {
			t.Fatalf("reconnect %d: %v", i, err)
		}
		if st.State != api.StateError || st.LastError == "" {
			t.Fatalf("reconnect %d: state %s, last error %q; want the attempt's failure", i, st.State, st.LastError)
		}
	}
}
