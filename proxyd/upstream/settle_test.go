package upstream

import (
	"context"
	"testing"
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
