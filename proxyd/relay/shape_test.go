package relay

import (
	"context"
	"encoding/json"
	"testing"
)

// Shape.Append, which frames a result, and Shape.Apply, which edits a
// copy, give the same bytes, with the list of the result's members as
// without it.
func TestShapeAppendIsApply(t *testing.T) {
	results := []string{
		`{"content":[]}`,
		`{"content":[],"resultType":"complete"}`,
		`{"resultType":"input_required","inputRequests":{}}`,
		` { "isError" : true , "resultType" : "complete" } `,
		`{"resultType":"complete","content":[],"resultType":"complete"}`,
		`{"content":[{"text":"{\"resultType\":1}"}] , "resultType":"complete"}`,
		`{}`,
		`{ }`,
		`null`,
	}
	for _, s := range []Shape{AsIs, Legacy, Modern} {
		for _, res := range results {
			m, err := ParseMessage([]byte(`{"jsonrpc":"2.0","id":1,"result":` + res + `}`))
			if err != nil {
				t.Fatal(err)
			}
			prefix := []byte(`{"result":`)
			want := string(prefix) + string(s.Apply(m.Result, nil))
			for _, ms := range []*Members{nil, &m.Members} {
				if got := s.Append(prefix, m.Result, ms); string(got) != want {
					t.Errorf("shape %d of %s (listed %v): Append gives %s, Apply %s", s, res, ms != nil, got, want)
				}
			}
		}
	}
}

// A shape refined by the list of a result's members (which spares the
// look for its resultType) frames the same bytes as the shape itself.
func TestRefinedShape(t *testing.T) {
	for _, res := range []string{
		`{"content":[]}`,
		`{"content":[],"resultType":"complete"}`,
		` { "isError" : true , "resultType" : "input_required" } `,
		`{ }`,
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"resultType":"complete"}`, // more than a list holds
	} {
		m, err := ParseMessage([]byte(`{"jsonrpc":"2.0","id":1,"result":` + res + `}`))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []Shape{AsIs, Legacy, Modern} {
			r := s.refined(m.Result, &m.Members)
			if got, want := string(r.Apply(m.Result, &m.Members)), string(s.Apply(m.Result, nil)); got != want {
				t.Errorf("shape %d of %s refined to %d: %s, want %s", s, res, r, got, want)
			}
			if got, want := string(r.Append(nil, m.Result, &m.Members)), string(s.Append(nil, m.Result, nil)); got != want {
				t.Errorf("shape %d of %s refined to %d, framed: %s, want %s", s, res, r, got, want)
			}
		}
	}
}

type resultUpstream struct {
	modern bool
	res    json.RawMessage
}

func (u resultUpstream) Relay(context.Context, *Exchange) (json.RawMessage, error) { return u.res, nil }
func (u resultUpstream) Modern() bool                                              { return u.modern }

type legacyPeer struct{ modernPeer }

func (legacyPeer) Modern() bool { return false }

// shapingPeer frames results itself (Shaper).
type shapingPeer struct {
	Peer
	shape *Shape
}

func (p shapingPeer) Shape(s Shape, _ *Members) { *p.shape = s }

// Do gives a peer that frames results the upstream's result as it came,
// with the shape to frame it in; any other peer gets it edited.
func TestDoShapesForThePeer(t *testing.T) {
	legacyRes := json.RawMessage(`{"content":[]}`)
	modernRes := json.RawMessage(`{"content":[],"resultType":"complete"}`)
	tests := []struct {
		name      string
		up        resultUpstream
		peer      Peer
		wantShape Shape
		want      string // what a peer that does not shape gets
	}{
		{"legacy client, legacy upstream", resultUpstream{false, legacyRes}, legacyPeer{}, Legacy, `{"content":[]}`},
		{"legacy client, modern upstream", resultUpstream{true, modernRes}, legacyPeer{}, Legacy, `{"content":[]}`},
		{"modern client, legacy upstream", resultUpstream{false, legacyRes}, modernPeer{}, Modern, `{"resultType":"complete","content":[]}`},
		{"modern client, modern upstream", resultUpstream{true, modernRes}, modernPeer{}, AsIs, `{"content":[],"resultType":"complete"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New()
			defer r.Close()
			req := func() *Request {
				return &Request{Exchange: Exchange{Method: "tools/call", Name: "echo", Params: json.RawMessage(`{"name":"echo"}`)}}
			}
			res, err := r.Do(context.Background(), tt.up, req(), tt.peer)
			if err != nil || string(res) != tt.want {
				t.Fatalf("Do = %s, %v; want %s", res, err, tt.want)
			}
			shape := Shape(-1)
			res, err = r.Do(context.Background(), tt.up, req(), shapingPeer{tt.peer, &shape})
			if err != nil || &res[0] != &tt.up.res[0] {
				t.Fatalf("Do for a shaping peer = %s, %v; want the upstream's %s as it came", res, err, tt.up.res)
			}
			if tt.wantShape != AsIs && shape != tt.wantShape {
				t.Errorf("shape %d, want %d", shape, tt.wantShape)
			}
			if got := string(shape.Append(nil, res, nil)); shape != -1 && got != tt.want {
				t.Errorf("framed in its shape: %s, want %s", got, tt.want)
			}
		})
	}
}

// A member a hostile peer sends twice is read as the peer beyond proxyd
// reads it (encoding/json: the last), and an edit leaves one or none: a
// legacy client gets no resultType, a client's progress notification
// only its own token, and the relay decides on the resultType the client
// would see.
func TestDuplicatesReadAsTheClientReads(t *testing.T) {
	res := json.RawMessage(`{"resultType":"complete","content":[],"resultType":"input_required"}`)
	if got := resultType(res, nil); got != resultInputRequired {
		t.Errorf("resultType of %s: %q, encoding/json reads input_required", res, got)
	}
	for _, got := range [][]byte{LegacyResult(res), Legacy.Append(nil, res, nil)} {
		if string(got) != `{"content":[]}` {
			t.Errorf("legacy shape of %s: %s", res, got)
		}
	}
	p := &notePeer{}
	h := &handler{peer: p, token: json.RawMessage(`7`)}
	h.notify(MethodProgress, json.RawMessage(`{"progressToken":"mcpx-p-1","progress":1,"progressToken":"mcpx-p-2"}`), false)
	if len(p.notes) != 1 || p.notes[0] != MethodProgress+` {"progressToken":7,"progress":1}` {
		t.Errorf("progress with its token twice reaches the client as %q", p.notes)
	}
}
