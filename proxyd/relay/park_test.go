package relay

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// legacyUpstream answers at once and keeps the context of its last call.
type legacyUpstream struct{ ctx context.Context }

func (u *legacyUpstream) Relay(ctx context.Context, ex *Exchange) (json.RawMessage, error) {
	u.ctx = ctx
	return json.RawMessage(`{"content":[]}`), nil
}
func (u *legacyUpstream) Modern() bool { return false }

type modernPeer struct{}

func (modernPeer) Modern() bool                   { return true }
func (modernPeer) Caps() Caps                     { return Caps{} }
func (modernPeer) Notify(string, json.RawMessage) {}
func (modernPeer) Ask(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return nil, Refusal("")
}

// A modern client's call on a legacy upstream runs on a context of its
// own (it may outlive the client's request); once the call is over, that
// context is released, not left to its deadline with all it holds.
func TestParkedCallReleasesItsContext(t *testing.T) {
	r := New()
	defer r.Close()
	up := &legacyUpstream{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := r.Do(ctx, up, &Request{Exchange: Exchange{Method: "tools/call", Name: "echo", Params: json.RawMessage(`{"name":"echo"}`)}}, modernPeer{})
	if err != nil || StringMember(res, "resultType") != "complete" {
		t.Fatalf("Do = %s, %v", res, err)
	}
	if up.ctx.Err() == nil {
		t.Error("the upstream call's context is still live after the call")
	}
}

// The -32021 refusal names the capability the way the modern era's
// MissingRequiredClientCapabilityError does: a ClientCapabilities object.
func TestMissingCapabilityData(t *testing.T) {
	for _, tc := range []struct{ method, want string }{
		{MethodSampling, `{"requiredCapabilities":{"sampling":{}}}`},
		{MethodRoots, `{"requiredCapabilities":{"roots":{}}}`},
		{MethodElicitation, `{"requiredCapabilities":{"elicitation":{}}}`},
	} {
		err := missingCapability(capabilityOf(tc.method))
		if err.Code != CodeMissingCapability || string(err.Data) != tc.want {
			t.Errorf("%s: got %d %s, want %d %s", tc.method, err.Code, err.Data, CodeMissingCapability, tc.want)
		}
	}
}

// askingUpstream is a legacy upstream whose call asks its client for
// input, the way upstream.Conn does: the request comes on a goroutine of
// its own while the call waits, and the call's result carries the answer.
type askingUpstream struct{}

func (askingUpstream) Modern() bool { return false }

func (askingUpstream) Relay(ctx context.Context, ex *Exchange) (json.RawMessage, error) {
	type answer struct {
		res json.RawMessage
		err error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := ex.Handler.Ask(ctx, MethodElicitation, json.RawMessage(`{"message":"Who are you?","requestedSchema":{"type":"object"}}`))
		got <- answer{res, err}
	}()
	select {
	case a := <-got:
		if a.err != nil {
			return nil, a.err
		}
		return json.RawMessage(`{"content":[],"answer":` + string(a.res) + `}`), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type elicitingPeer struct{ modernPeer }

func (elicitingPeer) Caps() Caps { return Caps{ElicitForm: true} }

// A modern client's call on a legacy upstream runs on the caller's
// goroutine; when the upstream asks, the client's round is answered early
// (input_required with a requestState) while the call goes on, the first
// Do returns ErrAnswered once the call ends, and the client's retry takes
// the call's result.
func TestFirstRoundAnsweredEarly(t *testing.T) {
	r := New()
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	early := make(chan json.RawMessage, 1)
	first := make(chan error, 1)
	stats := &Stats{}
	go func() {
		_, err := r.Do(ctx, askingUpstream{}, &Request{
			Exchange: Exchange{Method: "tools/call", Name: "ask", Params: json.RawMessage(`{"name":"ask"}`)},
			Stats:    stats,
			Answer: func(res json.RawMessage, err error) {
				if err != nil {
					t.Errorf("early answer: %v", err)
				}
				early <- res
			},
		}, elicitingPeer{})
		first <- err
	}()
	var res json.RawMessage
	select {
	case res = <-early:
	case err := <-first:
		t.Fatalf("Do returned %v before answering the round", err)
	case <-ctx.Done():
		t.Fatal("no early answer")
	}
	state := StringMember(res, "requestState")
	reqs, _ := Member(res, "inputRequests")
	var asked map[string]json.RawMessage
	if StringMember(res, "resultType") != "input_required" || !isParkToken(state) || json.Unmarshal(reqs, &asked) != nil || len(asked) != 1 {
		t.Fatalf("early answer %s", res)
	}
	if got := stats.Inputs(); len(got) != 1 || got[0].Action != "asked" {
		t.Fatalf("first round's inputs %+v", got)
	}
	select {
	case err := <-first:
		t.Fatalf("Do returned %v while the call waits for the retry", err)
	default:
	}
	var key string
	for k := range asked {
		key = k
	}
	params := json.RawMessage(`{"name":"ask","requestState":"` + state + `","inputResponses":{"` + key + `":{"action":"accept","content":{"name":"Ada"}}}}`)
	final, err := r.Do(ctx, askingUpstream{}, &Request{Exchange: Exchange{Method: "tools/call", Name: "ask", Params: params}}, elicitingPeer{})
	if err != nil || !strings.Contains(string(final), `"answer":{"action":"accept","content":{"name":"Ada"}}`) || StringMember(final, "resultType") != "complete" {
		t.Fatalf("retry = %s, %v", final, err)
	}
	if err := <-first; !errors.Is(err, ErrAnswered) {
		t.Fatalf("first Do = %v, want ErrAnswered", err)
	}
}

// Without Request.Answer nobody can take a modern client's round early:
// the upstream's request is refused, and the call ends on its own.
func TestFirstRoundWithoutAnswerRefusesAsks(t *testing.T) {
	r := New()
	defer r.Close()
	stats := &Stats{}
	_, err := r.Do(context.Background(), askingUpstream{}, &Request{Exchange: Exchange{Method: "tools/call", Name: "ask", Params: json.RawMessage(`{"name":"ask"}`)}, Stats: stats}, elicitingPeer{})
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Code != CodeMethodNotFound {
		t.Fatalf("Do = %v, want the refusal", err)
	}
	if got := stats.Inputs(); len(got) != 1 || got[0].Action != "refused" {
		t.Fatalf("inputs %+v", got)
	}
}

// heldUpstream is a legacy upstream whose call asks its client for input
// and then fails once release is closed, answered or not.
type heldUpstream struct{ release chan struct{} }

func (heldUpstream) Modern() bool { return false }

func (u heldUpstream) Relay(ctx context.Context, ex *Exchange) (json.RawMessage, error) {
	go func() {
		_, _ = ex.Handler.Ask(ctx, MethodElicitation, json.RawMessage(`{"message":"Who?","requestedSchema":{"type":"object"}}`))
	}()
	select {
	case <-u.release:
		return nil, errors.New("the upstream gave up")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Calls that ended while waiting for their clients' retries (the call's
// timeout, the upstream's failure) no longer hold a place among the
// running ones: a new call can wait as soon as they end, an ended call's
// retry still hears how it ended, and past maxParkedEnded the one that
// ended first is let go.
func TestEndedParkedCallsLeaveRoom(t *testing.T) {
	r := New()
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// park starts a call on up and returns a channel with its first Do's
	// return once the call ends, and its first round's answer.
	park := func(up Upstream) (chan error, json.RawMessage, error) {
		type early struct {
			res json.RawMessage
			err error
		}
		got := make(chan early, 1)
		first := make(chan error, 1)
		go func() {
			_, err := r.Do(ctx, up, &Request{
				Exchange: Exchange{Method: "tools/call", Name: "ask", Params: json.RawMessage(`{"name":"ask"}`)},
				Answer:   func(res json.RawMessage, err error) { got <- early{res, err} },
			}, elicitingPeer{})
			first <- err
		}()
		select {
		case e := <-got:
			return first, e.res, e.err
		case err := <-first:
			return first, nil, err
		}
	}
	retry := func(state string) error {
		params := json.RawMessage(`{"name":"ask","requestState":"` + state + `","inputResponses":{}}`)
		_, err := r.Do(ctx, heldUpstream{}, &Request{Exchange: Exchange{Method: "tools/call", Name: "ask", Params: params}}, elicitingPeer{})
		return err
	}
	held := heldUpstream{release: make(chan struct{})}
	states := make([]string, maxParked)
	firsts := make([]chan error, maxParked)
	var wg sync.WaitGroup
	for i := range maxParked {
		wg.Go(func() {
			first, res, err := park(held)
			if err != nil || StringMember(res, "resultType") != "input_required" {
				t.Errorf("call %d: %s, %v; want input_required", i, res, err)
			}
			states[i], firsts[i] = StringMember(res, "requestState"), first
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if _, _, err := park(heldUpstream{release: make(chan struct{})}); err == nil || !strings.Contains(err.Error(), "waiting for their clients' input") {
		t.Fatalf("a call past %d running ones: %v, want it refused", maxParked, err)
	}
	close(held.release)
	for i, first := range firsts {
		if err := <-first; !errors.Is(err, ErrAnswered) {
			t.Fatalf("call %d's first Do = %v, want ErrAnswered", i, err)
		}
	}
	// Every waiting call has ended: a new one waits, which lets go of the
	// call that ended first (maxParkedEnded of them wait already).
	next := heldUpstream{release: make(chan struct{})}
	defer close(next.release)
	if _, res, err := park(next); err != nil || StringMember(res, "resultType") != "input_required" {
		t.Fatalf("a call after the others ended: %s, %v; want input_required", res, err)
	}
	gone, kept := 0, 0
	for _, state := range states {
		switch err := retry(state); {
		case err != nil && strings.Contains(err.Error(), "the upstream gave up"):
			kept++
		case err != nil && strings.Contains(err.Error(), "unknown or has expired"):
			gone++
		default:
			t.Fatalf("the retry of an ended call: %v", err)
		}
	}
	if gone != 1 || kept != maxParked-1 {
		t.Fatalf("retries of the ended calls: %d told how it ended, %d expired; want %d and 1", kept, gone, maxParked-1)
	}
}
