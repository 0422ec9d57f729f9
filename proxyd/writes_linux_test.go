//go:build linux

package proxyd

import (
	"context"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/internal/tcpcount"
)

// The endpoint answers a relayed call in one write, in every era
// combination: headers and a JSON answer leave together, and nothing is
// flushed ahead of them (a flush of the headers, or the answer written
// before its length is known, is a second write and a second wake-up of
// the client, which a bare reverse proxy does not cost it). The kernel
// counts them at the client: the data segments its connection received
// (TCP_INFO), one a write on loopback with Nagle's algorithm off, as Go
// sets it on both ends.
func TestEndpointAnswersInOneWrite(t *testing.T) {
	ep := startPinnedEras(t)
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	// post returns the answer and the data segments the client received
	// while it came.
	post := func(body string, h map[string]string) (*http.Response, string, uint32) {
		t.Helper()
		var conn net.Conn
		var before uint32
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
			conn = info.Conn
			before = dataSegmentsIn(t, conn)
		}}
		resp, out, err := ep.post(httptrace.WithClientTrace(context.Background(), trace), hc, body, h)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(out), dataSegmentsIn(t, conn) - before
	}
	resp, _, _ := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil)
	legacy := map[string]string{"Mcp-Session-Id": resp.Header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version": "2025-11-25"}
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, legacy)
	for _, tt := range []struct{ name, tool string }{
		{"legacy-legacy", "fxl__echo"}, {"legacy-modern", "fxm__echo"}, {"modern-legacy", "fxl__echo"}, {"modern-modern", "fxm__echo"},
	} {
		h, meta := legacy, ``
		if strings.HasPrefix(tt.name, "modern") {
			h = map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tt.tool}
			meta = `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
		}
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tt.tool + `","arguments":{"text":"one write"}` + meta + `}}`
		for i := range 3 {
			resp, out, segs := post(body, h)
			if resp.StatusCode != http.StatusOK || !strings.Contains(out, `"text":"one write"`) {
				t.Fatalf("%s: %d %s", tt.name, resp.StatusCode, out)
			}
			if segs != 1 {
				t.Errorf("%s, call %d: the answer came in %d writes, want 1", tt.name, i+1, segs)
			}
		}
	}
}

// dataSegmentsIn is the count of data segments the kernel has received
// on conn, a TCP connection.
func dataSegmentsIn(t *testing.T, conn net.Conn) uint32 {
	t.Helper()
	sc, ok := conn.(*net.TCPConn)
	if !ok {
		t.Fatalf("connection %T is not TCP", conn)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	in, _, err := tcpcount.DataSegments(raw)
	if err != nil {
		t.Fatal(err)
	}
	return in
}
