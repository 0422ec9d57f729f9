package relay

import (
	"context"
	"encoding/json"
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
