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
	away     bool
	accepts  bool
	attender bool
}

func (h *stubHandler) Notify(string, json.RawMessage) {}
func (h *stubHandler) Accepts(string) bool            { return h.accepts }
func (h *stubHandler) Ask(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return nil, nil
}

type attendedHandler struct{ *stubHandler }

func (h attendedHandler) Attended() bool { return !h.away }

// TestPickRoutesOutsideRequests: a request of the upstream outside any
// call's stream goes to a call whose client can answer and waits now,
// then to one not yet asked for the method, then to the oldest.
func TestPickRoutesOutsideRequests(t *testing.T) {
	start := time.Now()
	tests := []struct {
		name  string
		calls []*stubHandler // oldest first
		asked map[string]bool
		want  string
	}{
		{"the only call", []*stubHandler{{name: "a", accepts: true}}, nil, "a"},
		{"none can answer", []*stubHandler{{name: "a"}}, nil, ""},
		{"the oldest", []*stubHandler{{name: "a", accepts: true}, {name: "b", accepts: true}}, nil, "a"},
		{"the oldest not yet asked", []*stubHandler{{name: "a", accepts: true}, {name: "b", accepts: true}}, map[string]bool{"a": true}, "b"},
		{"one that can answer", []*stubHandler{{name: "a"}, {name: "b", accepts: true}}, nil, "b"},
		{"a waiting client before an older parked call", []*stubHandler{{name: "parked", accepts: true, attender: true, away: true}, {name: "b", accepts: true, attender: true}}, nil, "b"},
		{"a waiting client even when asked already", []*stubHandler{{name: "parked", accepts: true, attender: true, away: true}, {name: "b", accepts: true}}, map[string]bool{"b": true}, "b"},
		{"a parked call when nobody else", []*stubHandler{{name: "parked", accepts: true, attender: true, away: true}}, nil, "parked"},
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
			got := r.pick("sampling/createMessage", func(x *exchange) bool { return x.ex.Handler.Accepts("sampling/createMessage") })
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
