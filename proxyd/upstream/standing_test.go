package upstream

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// The standing stream routes call notifications itself and hands every
// other event to the library byte for byte, however the reads split it.
func TestStandingStreamRoutes(t *testing.T) {
	const (
		progress = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"t\",\"progress\":1}}\n\n"
		message  = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\r\n\r\n"
		changed  = "id: 7\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n"
		request  = "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"roots/list\"}\n\n"
		comment  = ": keep-alive\n\n"
		split    = "data: {\"jsonrpc\":\"2.0\",\n" + "data: \"method\":\"notifications/progress\",\"params\":{}}\n\n"
		bad      = "data: not json\n\n"
		unended  = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}"
	)
	for _, tc := range []struct {
		name, in, out string
		taken         []string
		takeMessages  bool
	}{
		{"progress taken", progress + changed, changed, []string{"notifications/progress"}, false},
		{"message left to the library when no call takes it", message + request, message + request, nil, false},
		{"message taken by a call", comment + message, comment, []string{"notifications/message"}, true},
		{"multi-line data", split + comment, comment, []string{"notifications/progress"}, false},
		{"not JSON-RPC", bad, bad, nil, false},
		{"an event cut off by the stream's end", changed + unended, changed + unended, nil, false},
	} {
		for _, read := range []struct {
			name string
			wrap func(io.Reader) io.Reader
		}{{"whole", func(r io.Reader) io.Reader { return r }}, {"byte by byte", iotest.OneByteReader}} {
			t.Run(tc.name+"/"+read.name, func(t *testing.T) {
				var taken []string
				st := &standingStream{rc: io.NopCloser(read.wrap(strings.NewReader(tc.in))), list: &standings{},
					route: func(method string, params json.RawMessage) bool {
						if !json.Valid(params) && params != nil {
							t.Errorf("params %q", params)
						}
						take := method == "notifications/progress" || method == "notifications/message" && tc.takeMessages
						if take {
							taken = append(taken, method)
						}
						return take
					}}
				got, err := io.ReadAll(iotest.OneByteReader(st))
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != tc.out {
					t.Errorf("passed on %q, want %q", got, tc.out)
				}
				if len(taken) != len(tc.taken) || len(taken) > 0 && taken[0] != tc.taken[0] {
					t.Errorf("routed %v, want %v", taken, tc.taken)
				}
			})
		}
	}
}
