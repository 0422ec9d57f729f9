package proxyd

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
)

// An open event stream must not hold shutdown for the whole drain budget:
// with a budget of an hour, this test hangs (and times out) unless
// streams end when shutdown starts.
func TestShutdownEndsStreams(t *testing.T) {
	fx, err := mcpserver.Start(mcpserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fx.Close()
	td := startDaemon(t, "listen: 127.0.0.1:0\nservers:\n  - name: fx\n    url: "+fx.URL()+"\n",
		func(o *Options) { o.ShutdownTimeout = time.Hour })
	waitReady(t, td, "fx")
	url, token := endpoint(t, td)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	get, _ := http.NewRequest(http.MethodGet, url, nil)
	get.Header.Set("Accept", "text/event-stream")
	get.Header.Set("Authorization", "Bearer "+token)
	get.Header.Set("Mcp-Session-Id", sid)
	get.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	stream, err := http.DefaultClient.Do(get)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %d", stream.StatusCode)
	}
	ended := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
		}
		close(ended)
	}()
	if err := td.stop(); err != nil {
		t.Fatal(err)
	}
	<-ended
}

// A call waiting for its client's retry (a modern client's call on a
// legacy upstream that asked for input) runs in the handler of the
// client's first request; shutdown must end it rather than drain it:
// with a drain budget and a call timeout of an hour, this test hangs
// unless it does.
func TestShutdownEndsCallsWaitingForRetries(t *testing.T) {
	up := startRelayUpstream(t)
	td := startDaemon(t, "listen: 127.0.0.1:0\nservers:\n  - name: legacy\n    url: "+up.url+"\n    protocol: legacy\n    timeout: 1h\n",
		func(o *Options) { o.ShutdownTimeout = time.Hour })
	waitReady(t, td, "legacy")
	url, token := endpoint(t, td)
	resp := postModernCall(t, url, token, "legacy__ask", "")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"input_required"`) {
		t.Fatalf("first round: %s", body)
	}
	if err := td.stop(); err != nil {
		t.Fatal(err)
	}
}
