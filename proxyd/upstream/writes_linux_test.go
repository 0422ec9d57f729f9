//go:build linux

package upstream

import (
	"context"
	"encoding/json"
	"net"
	"net/http/httptrace"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/tcpcount"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// A relayed call reaches the upstream in one write, in both eras, renamed
// or not, with a progressToken or not, with a body of tens of KiB. net/http writes a request's
// headers and a body it knows to be in memory together, but flushes the
// headers of any other body on their own and writes each part of a
// multi-part reader apart: four writes for a small call, which cost the
// 16-client benchmark rows a tenth of their throughput. The kernel counts
// them: the data segments the connection sent (TCP_INFO), one a write on
// loopback with Nagle's algorithm off, as Go sets it.
func TestRelayedCallIsOneWrite(t *testing.T) {
	for _, protocol := range []string{config.ProtocolLegacy, config.ProtocolModern} {
		t.Run(protocol, func(t *testing.T) {
			fx := startFixture(t, mcpserver.EraBoth)
			m := newManager(t, config.Server{Name: "fx", URL: fx.URL(), Protocol: protocol})
			c, _ := m.Get("fx")
			waitState(t, c, api.StateReady)
			for _, tt := range []struct {
				name   string
				ex     *Exchange
				writes uint32
			}{
				{name: "plain", ex: callExchange("echo", `{"text":"hi"}`, &recordingHandler{}, false), writes: 1},
				{name: "renamed", ex: renamedCall(`{"name":"fx__echo","arguments":{"text":"hi"},"_meta":{"k":1}}`), writes: 1},
				{name: "progress", ex: callExchange("echo", `{"text":"hi"}`, &recordingHandler{}, true), writes: 1},
				// Headers and body fit proxyd's write buffer (64 KiB);
				// with net/http's 4 KiB this took two writes. (A write
				// larger than about 48 KiB leaves loopback as two
				// segments, so the kernel's count stops being one a
				// write there.)
				{name: "30 KiB", ex: callExchange("echo", `{"text":"`+strings.Repeat("x", 30<<10)+`"}`, &recordingHandler{}, false), writes: 1},
			} {
				// Counted from taking the connection to the answer's first
				// byte: by then the upstream has read the whole request,
				// and the connection is not yet back in the pool, where a
				// request of the connection's own (the modern era's
				// subscriptions/listen, opened once ready) may take it.
				var conn net.Conn
				var before, after uint32
				trace := &httptrace.ClientTrace{
					GotConn: func(info httptrace.GotConnInfo) {
						conn = info.Conn
						before = dataSegmentsOut(t, conn)
					},
					GotFirstResponseByte: func() { after = dataSegmentsOut(t, conn) },
				}
				ctx := httptrace.WithClientTrace(context.Background(), trace)
				if _, err := c.Relay(ctx, tt.ex); err != nil {
					t.Fatalf("%s: %v", tt.name, err)
				}
				if conn == nil || after == 0 {
					t.Fatalf("%s: no connection or answer seen", tt.name)
				}
				if n := after - before; n != tt.writes {
					t.Errorf("%s: the call took %d writes to the upstream, want %d", tt.name, n, tt.writes)
				}
			}
		})
	}
}

// renamedCall is a call whose params still carry the client's name for
// the tool and its _meta, with the edit the upstream connection makes.
func renamedCall(params string) *Exchange {
	return &Exchange{
		Method:  "tools/call",
		Name:    "echo",
		Params:  json.RawMessage(params),
		Edit:    &relay.Edit{Key: "name", Value: []byte(`"echo"`), Drop: "_meta"},
		Handler: &recordingHandler{},
	}
}

// dataSegmentsOut is the count of data segments the kernel has sent on
// conn, a counted TCP connection.
func dataSegmentsOut(t *testing.T, conn net.Conn) uint32 {
	t.Helper()
	cc, ok := conn.(*countedConn)
	if !ok || cc.raw == nil {
		t.Fatalf("connection %T is not a counted TCP connection", conn)
	}
	_, out, err := tcpcount.DataSegments(cc.raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
