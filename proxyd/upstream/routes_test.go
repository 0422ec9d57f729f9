package upstream

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// stubHandler is the client side of a call as routes sees it: whether it
// can answer, and whether its client waits now.
type stubHandler struct {
	name     string
	owner    string // the client's session ("": a client of its own)
	away     bool
	accepts  bool
	attender bool
}

func (h *stubHandler) Owner() string { return h.owner }

func (h *stubHandler) Notify(string, json.RawMessage) {}
func (h *stubHandler) Accepts(string) bool            { return h.accepts }
func (h *stubHandler) Ask(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return nil, nil
}

type attendedHandler struct{ *stubHandler }

func (h attendedHandler) Attended() bool { return !h.away }

// TestPickRoutesOutsideRequests: a request of the upstream outside any
// call's stream goes to a call whose client can answer and waits now,
// then to one not yet asked for the method, then to the oldest; but only
// among one client's calls: with calls of several clients able to answer
// none is picked (shared). With none able to answer, the only call in
// flight is (its client cannot answer). A parked call whose client has not
// come back counts only when no other call's client waits.
func TestPickRoutesOutsideRequests(t *testing.T) {
	start := time.Now()
	tests := []struct {
		name   string
		calls  []*stubHandler // oldest first
		asked  map[string]bool
		want   string
		shared bool
	}{
		{"the only call", []*stubHandler{{name: "a", accepts: true}}, nil, "a", false},
		{"none can answer", []*stubHandler{{name: "a"}}, nil, "a", false},
		{"none of two can answer", []*stubHandler{{name: "a"}, {name: "b"}}, nil, "", false},
		{"the oldest", []*stubHandler{{name: "a", owner: "s1", accepts: true}, {name: "b", owner: "s1", accepts: true}}, nil, "a", false},
		{"the oldest not yet asked", []*stubHandler{{name: "a", owner: "s1", accepts: true}, {name: "b", owner: "s1", accepts: true}}, map[string]bool{"a": true}, "b", false},
		{"one that can answer", []*stubHandler{{name: "a", owner: "s2"}, {name: "b", owner: "s1", accepts: true}}, nil, "b", false},
		{"a waiting client before an older parked call", []*stubHandler{{name: "parked", owner: "s1", accepts: true, attender: true, away: true}, {name: "b", owner: "s1", accepts: true, attender: true}}, nil, "b", false},
		{"a waiting client even when asked already", []*stubHandler{{name: "parked", owner: "s1", accepts: true, attender: true, away: true}, {name: "b", owner: "s1", accepts: true}}, map[string]bool{"b": true}, "b", false},
		{"a parked call when nobody else", []*stubHandler{{name: "parked", accepts: true, attender: true, away: true}}, nil, "parked", false},
		{"calls of two sessions", []*stubHandler{{name: "a", owner: "s1", accepts: true}, {name: "b", owner: "s2", accepts: true}}, nil, "", true},
		{"two clients of their own", []*stubHandler{{name: "a", accepts: true}, {name: "b", accepts: true}}, nil, "", true},
		{"a session's calls and a modern client's", []*stubHandler{{name: "a", owner: "s1", accepts: true}, {name: "b", owner: "s1", accepts: true}, {name: "m", accepts: true}}, nil, "", true},
		{"a waiting client of one session and a parked call", []*stubHandler{{name: "parked", accepts: true, attender: true, away: true}, {name: "b", owner: "s1", accepts: true}}, nil, "b", false},
		{"a waiting modern client and a parked call", []*stubHandler{{name: "parked", accepts: true, attender: true, away: true}, {name: "m", accepts: true, attender: true}}, nil, "m", false},
		{"two parked calls, nobody waiting", []*stubHandler{{name: "p1", accepts: true, attender: true, away: true}, {name: "p2", accepts: true, attender: true, away: true}}, nil, "", true},
		{"two waiting clients and a parked call", []*stubHandler{{name: "parked", accepts: true, attender: true, away: true}, {name: "m", accepts: true, attender: true}, {name: "b", owner: "s1", accepts: true}}, nil, "", true},
		{"a waiting client that cannot answer and a parked call", []*stubHandler{{name: "parked", accepts: true, attender: true, away: true}, {name: "b", owner: "s1"}}, nil, "b", false},
		{"a waiting client that cannot answer, two parked calls", []*stubHandler{{name: "p1", accepts: true, attender: true, away: true}, {name: "p2", accepts: true, attender: true, away: true}, {name: "m", attender: true}}, nil, "m", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r routes
			for i, h := range tt.calls {
				x := &exchange{ex: &Exchange{}, started: start.Add(time.Duration(i) * time.Millisecond)}
				if h.attender {
					x.ex.Handler = attendedHandler{h}
				} else {
					x.ex.Handler = h
				}
				if tt.asked[h.name] {
					x.asked = map[string]bool{"sampling/createMessage": true}
				}
				r.add(x)
			}
			got, shared := r.pick("sampling/createMessage", func(x *exchange) bool { return x.ex.Handler.Accepts("sampling/createMessage") })
			if shared != tt.shared {
				t.Errorf("shared = %v, want %v", shared, tt.shared)
			}
			name := ""
			if got != nil {
				switch h := got.ex.Handler.(type) {
				case *stubHandler:
					name = h.name
				case attendedHandler:
					name = h.name
				}
			}
			if name != tt.want {
				t.Errorf("picked %q, want %q", name, tt.want)
			}
		})
	}
}
