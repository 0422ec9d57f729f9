package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
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
					route: func(m relay.Message) bool {
						method, params := m.Method, m.Params
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

// A standing stream the upstream floods never settles: each call waits at
// most settleRounds of the reader's reads (or settleMax) for it, gets its
// own notification and result, and the stream stays open and read.
func TestFloodedStandingStreamBoundsTheSettle(t *testing.T) {
	fx := startFixture(t, mcpserver.EraLegacy)
	if _, err := fx.AddFault(mcpserver.Fault{Kind: mcpserver.FaultSSE, Method: mcpserver.MethodGET, SSE: mcpserver.SSEFlood}); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, config.Server{Name: "fx", URL: fx.URL(), Protocol: config.ProtocolLegacy})
	c, _ := m.Get("fx")
	waitState(t, c, api.StateReady)
	// taken is what the standing streams' readers have taken so far.
	taken := func() int64 {
		c.standing.mu.Lock()
		defer c.standing.mu.Unlock()
		var n int64
		for st := range c.standing.streams {
			if st.counts != nil {
				n += st.counts.taken.Load()
			}
		}
		return n
	}
	waitfor.Cond(t, 20*time.Second, "the flood to be read", func() (bool, string) {
		n := taken()
		return n > 64<<10, fmt.Sprintf("%d bytes taken", n)
	})
	before := taken()
	// A call waits at most settleMax (100 ms) for the stream; a settle
	// without bounds would hold each call until its deadline.
	const calls = 10
	const limit = 5 * time.Second
	for i := range calls {
		h := &recordingHandler{}
		ctx, cancel := context.WithTimeout(context.Background(), 2*limit)
		start := time.Now()
		res, err := c.Relay(ctx, callExchange(mcpserver.ToolProgress, fmt.Sprintf(`{"text":"call %d"}`, i), h, true))
		took := time.Since(start)
		cancel()
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if !strings.Contains(string(res), fmt.Sprintf("call %d", i)) {
			t.Fatalf("call %d: result %s", i, res)
		}
		if got := h.notifications("notifications/progress"); len(got) != 1 || !strings.Contains(got[0], `"progressToken":"mcpx-p-`) {
			t.Fatalf("call %d: progress %q, want its own one (the flood's stale token is not a call's)", i, got)
		}
		if took > limit {
			t.Fatalf("call %d took %v: the flooded stream held it past the settle's bound", i, took)
		}
	}
	if n := taken() - before; n < 64<<10 {
		t.Fatalf("the standing stream's reader took %d bytes during the calls: the flood was not being read", n)
	}
	if st := c.Status(); st.State != api.StateReady {
		t.Fatalf("state %s (%s), want ready", st.State, st.LastError)
	}
}
