package relay

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// notePeer records the notifications it is sent.
type notePeer struct{ notes []string }

func (p *notePeer) Modern() bool { return false }
func (p *notePeer) Caps() Caps   { return Caps{} }
func (p *notePeer) Notify(method string, params json.RawMessage) {
	p.notes = append(p.notes, method+" "+string(params))
}
func (p *notePeer) Ask(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return nil, nil
}

func TestURLSigninsForALegacyClient(t *testing.T) {
	const url = `{"mode":"url","url":"http://127.0.0.1:1/a","message":"m"}`
	const urlWithID = `{"mode":"url","url":"http://127.0.0.1:1/a","message":"m","elicitationId":"up-1"}`
	const askAgain = `{"resultType":"input_required","inputRequests":{"k":{"method":"elicitation/create","params":` + url + `}}}`
	const askOther = `{"resultType":"input_required","inputRequests":{"k":{"method":"elicitation/create","params":{"mode":"url","url":"http://127.0.0.1:1/b","message":"m"}}}}`
	tests := []struct {
		name      string
		params    string // the upstream's request
		answer    string // the client's
		next      string // the upstream's next result
		wantID    string // "" when the upstream's id is kept as is; "mcpx-e-" prefix otherwise
		completed bool
	}{
		{"accepted, then the result", urlWithID, `{"action":"accept"}`, `{"content":[],"resultType":"complete"}`, "up-1", true},
		{"accepted without an id: proxyd's id", url, `{"action":"accept"}`, `{"content":[]}`, "mcpx-e-", true},
		{"accepted, asked again for the same URL: not done", url, `{"action":"accept"}`, askAgain, "mcpx-e-", false},
		{"accepted, asked for another URL: the first is done", url, `{"action":"accept"}`, askOther, "mcpx-e-", true},
		{"declined: nothing to complete", urlWithID, `{"action":"decline"}`, `{"content":[]}`, "up-1", false},
		{"a form has no id", `{"message":"m","requestedSchema":{}}`, `{"action":"accept","content":{}}`, `{"content":[]}`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var u urlSignins
			peer := &notePeer{}
			u.completed(peer, json.RawMessage(`{"resultType":"input_required"}`), nil) // the first round: nothing accepted yet
			params := u.identify(MethodElicitation, json.RawMessage(tt.params))
			id := StringMember(params, "elicitationId")
			if !strings.HasPrefix(id, tt.wantID) || tt.wantID == "" && id != "" {
				t.Fatalf("elicitationId %q, want %q…", id, tt.wantID)
			}
			u.answered(MethodElicitation, params, json.RawMessage(tt.answer))
			u.completed(peer, json.RawMessage(tt.next), nil)
			want := 0
			if tt.completed {
				want = 1
			}
			if len(peer.notes) != want {
				t.Fatalf("notifications %q, want %d", peer.notes, want)
			}
			if want == 1 && peer.notes[0] != MethodElicitationComplete+` {"elicitationId":"`+id+`"}` {
				t.Fatalf("notification %q for id %q", peer.notes[0], id)
			}
			// Announced once: a later result announces nothing more.
			u.completed(peer, json.RawMessage(`{"content":[]}`), nil)
			if len(peer.notes) != want {
				t.Fatalf("announced again: %q", peer.notes)
			}
		})
	}
}
