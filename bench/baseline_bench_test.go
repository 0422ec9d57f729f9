package bench

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
)

// TestBaselineCompletesStreams: the reverse proxy the benchmark measures
// proxyd against carries every SSE answer whole, the client's calls all
// on one connection (a cut answer also ends the client's connection). A
// baseline that cut answers would have its cut calls left
// out of its figures (see path.call); net/http's HTTP/1 server cut about
// one progress call in seventy this way until the baseline asked for full
// duplex.
func TestBaselineCompletesStreams(t *testing.T) {
	dir := buildBinaries(t, "cmd/mcpx-fixtures", "bench/rproxy")
	up := startProc(t, "url", filepath.Join(dir, "mcpx-fixtures"), "mcp", "--era", "both")
	rp := startProc(t, "url", filepath.Join(dir, "rproxy"), strings.TrimSuffix(up, "/mcp"))
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	t.Cleanup(hc.CloseIdleConnections)
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + mcpserver.ToolProgress +
		`","arguments":{"text":"baseline"},"_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	const calls = 1000
	cut, conns := 0, 0
	var first string
	for range calls {
		req, err := http.NewRequest(http.MethodPost, rp+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", mcpserver.ToolProgress)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(ci httptrace.GotConnInfo) {
				if !ci.Reused {
					conns++
				}
			},
		}))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("call through the reverse proxy: %v", err)
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Contains(out, []byte(`"notifications/progress"`)) || !bytes.Contains(out, []byte(`"result"`)) {
			if cut++; first == "" {
				first = fmt.Sprintf("%q (read error: %v)", out, err)
			}
		}
	}
	if cut > 0 || conns != 1 {
		t.Fatalf("%d of %d answers through the reverse proxy were not whole, over %d connections; first: %s", cut, calls, conns, first)
	}
}
