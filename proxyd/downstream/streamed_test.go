package downstream

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// slowBookkeeping answers a call, on an SSE stream (a progress
// notification, then the result) when stream is set, and leaves work for
// after the answer (relay.AfterAnswer, as the read of an upstream
// stream's end is) and bookkeeping, both waiting for release and noting
// in ran that they ran.
type slowBookkeeping struct {
	hintBackend
	stream  bool
	release chan struct{}
	ran     chan string
}

func (b *slowBookkeeping) Relay(ctx context.Context, c *Call) (json.RawMessage, error) {
	release, ran := b.release, b.ran
	relay.AfterAnswer(ctx, func() {
		<-release
		ran <- "later"
	})
	c.Then = func() {
		<-release
		ran <- "then"
	}
	if b.stream {
		c.Peer.Notify("notifications/progress", json.RawMessage(`{"progressToken":`+string(c.ProgressToken)+`,"progress":1}`))
	}
	return json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`), nil
}

// An answer is out whole (a streamed one's body to its last chunk) while
// the call's bookkeeping and the work left for after the answer still
// wait, and both then run; after a streamed answer on one goroutine, the
// work left first.
func TestStreamedAnswerEndsBeforeBookkeeping(t *testing.T) {
	b := &slowBookkeeping{}
	_, srv := startEndpoint(t, b)
	for _, modern := range []bool{false, true} {
		for _, stream := range []bool{true, false} {
			b.stream, b.release, b.ran = stream, make(chan struct{}), make(chan string, 2)
			req := progressCall(t, srv.URL+"/mcp", modern)
			body := make(chan string, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					body <- err.Error()
					return
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				body <- resp.Header.Get("Content-Type") + "\n" + string(b)
			}()
			want := "application/json"
			if stream {
				want = "text/event-stream"
			}
			select {
			case got := <-body:
				if !strings.HasPrefix(got, want) || stream != strings.Contains(got, `"progress":1`) || !strings.Contains(got, `"text":"ok"`) {
					t.Fatalf("modern %v, stream %v: want the result as %s, got %s", modern, stream, want, got)
				}
			case <-time.After(20 * time.Second):
				close(b.release)
				t.Fatalf("modern %v, stream %v: the answer did not end while the bookkeeping waited", modern, stream)
			}
			close(b.release)
			var ran []string
			for len(ran) < 2 {
				select {
				case r := <-b.ran:
					ran = append(ran, r)
				case <-time.After(20 * time.Second):
					t.Fatalf("modern %v, stream %v: only %v of the work after the answer ran", modern, stream, ran)
				}
			}
			if stream && (ran[0] != "later" || ran[1] != "then") {
				t.Errorf("modern %v: after a streamed answer ran %v, want [later then]", modern, ran)
			}
		}
	}
}

// progressCall is a call of echo with a progressToken: a modern
// request, or a legacy one on a session it initializes.
func progressCall(t *testing.T, url string, modern bool) *http.Request {
	t.Helper()
	if modern {
		req := endpointRequest(t, url, "2026-07-28", "", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},`+
			`"_meta":{"progressToken":"p1","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "echo")
		return req
	}
	return legacyRequest(t, url, legacySessionID(t, url), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{"progressToken":"p1"}}}`)
}
