package proxyd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
)

// BenchmarkRelayCall is one tools/call through the endpoint per era
// combination, from a plain HTTP client: a profile of the call path ('make
// bench' compares it with a bare reverse proxy).
func BenchmarkRelayCall(b *testing.B) {
	ep := startPinnedEras(b)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	post := func(body string, h map[string]string) (*http.Response, []byte) {
		resp, out, err := ep.post(context.Background(), hc, body, h)
		if err != nil {
			b.Fatal(err)
		}
		return resp, out
	}
	resp, _ := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`, nil)
	sid := resp.Header.Get("Mcp-Session-Id")
	legacy := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, legacy)
	modern := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}
	// The -progress calls carry a progressToken: the fixture's progress
	// tool then sends one notification and the answer is an SSE stream
	// that must carry it (a legacy upstream may send it on proxyd's GET
	// stream, which proxyd settles before the result).
	// The -64k calls carry a 64 KiB argument, which the echo tool
	// returns: what proxyd does per byte of a message. The -64kjson
	// calls' argument is JSON records in a text, as JSON in a string: an
	// escaped quote every few bytes, the slow path of that work.
	large := strings.Repeat("benchmark payload ", 64<<10/18)
	quoted, _ := json.Marshal(mcpserver.RecordsText(64 << 10))
	records := string(quoted[1 : len(quoted)-1])
	for _, cb := range []struct{ name, tool string }{
		{"legacy-legacy", "fxl__echo"}, {"legacy-modern", "fxm__echo"}, {"modern-legacy", "fxl__echo"}, {"modern-modern", "fxm__echo"},
		{"legacy-legacy-progress", "fxl__progress"}, {"legacy-modern-progress", "fxm__progress"},
		{"modern-legacy-progress", "fxl__progress"}, {"modern-modern-progress", "fxm__progress"},
		{"legacy-legacy-64k", "fxl__echo"}, {"legacy-modern-64k", "fxm__echo"}, {"modern-legacy-64k", "fxl__echo"}, {"modern-modern-64k", "fxm__echo"},
		{"legacy-legacy-64kjson", "fxl__echo"}, {"legacy-modern-64kjson", "fxm__echo"}, {"modern-legacy-64kjson", "fxl__echo"}, {"modern-modern-64kjson", "fxm__echo"},
	} {
		b.Run(cb.name, func(b *testing.B) {
			progress := strings.HasSuffix(cb.name, "-progress")
			text := "benchmark payload"
			if strings.HasSuffix(cb.name, "-64k") {
				text = large
			}
			if strings.HasSuffix(cb.name, "-64kjson") {
				text = records
			}
			meta, legacyMeta := ``, ``
			if progress {
				meta = `"progressToken":"bench"`
				legacyMeta = `,"_meta":{` + meta + `}`
			}
			h, body := legacy, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+cb.tool+`","arguments":{"text":"`+text+`"}`+legacyMeta+`}}`
			if strings.HasPrefix(cb.name, "modern") {
				h = map[string]string{"Mcp-Name": cb.tool}
				for k, v := range modern {
					h[k] = v
				}
				if meta != "" {
					meta += ","
				}
				body = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + cb.tool + `","arguments":{"text":"` + text + `"},"_meta":{` + meta + `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
			}
			want := "benchmark payload"
			if text == records {
				want = `record 1`
			}
			b.ReportAllocs()
			for b.Loop() {
				_, out := post(body, h)
				if !bytes.Contains(out, []byte(want)) || progress && !bytes.Contains(out, []byte("notifications/progress")) {
					b.Fatalf("answer %s", out)
				}
			}
		})
	}
}

// pinnedEras is a daemon in front of the fixture (both eras) with a server
// entry pinned to each era: fxl (legacy) and fxm (modern).
type pinnedEras struct {
	url, token string
}

func startPinnedEras(tb testing.TB) pinnedEras {
	tb.Helper()
	fx, err := mcpserver.Start(mcpserver.Options{Era: mcpserver.EraBoth})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { fx.Close() })
	td := startDaemon(tb, fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: fxl\n    url: %s\n    protocol: legacy\n  - name: fxm\n    url: %s\n    protocol: modern\n", fx.URL(), fx.URL()))
	waitReady(tb, td, "fxl")
	waitReady(tb, td, "fxm")
	url, token := endpoint(tb, td)
	return pinnedEras{url: url, token: token}
}

// post sends body to the endpoint as a client does, with headers h, and
// reads the answer whole.
func (p pinnedEras) post(ctx context.Context, hc *http.Client, body string, h map[string]string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+p.token)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp, out, err
}
