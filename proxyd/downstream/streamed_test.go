package downstream

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// slowBookkeeping answers a call on an SSE stream (a progress
// notification, then the result) and leaves bookkeeping that waits for
// release.
type slowBookkeeping struct {
	hintBackend
	release, recorded chan struct{}
}

func (b *slowBookkeeping) Relay(_ context.Context, c *Call) (json.RawMessage, error) {
	release, recorded := b.release, b.recorded
	c.Then = func() {
		<-release
		close(recorded)
	}
	c.Peer.Notify("notifications/progress", json.RawMessage(`{"progressToken":`+string(c.ProgressToken)+`,"progress":1}`))
	return json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`), nil
}

// A streamed answer ends (its body's last chunk) as soon as the result is
// out: the client reading the stream to its end does not wait for the
// call's bookkeeping, which still runs.
func TestStreamedAnswerEndsBeforeBookkeeping(t *testing.T) {
	const token = "mcpx_test_token_0123456789abcdef0123456789"
	b := &slowBookkeeping{}
	s := New(b, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.Sync()
	srv := httptest.NewServer(s.Handler(token, ""))
	t.Cleanup(srv.Close)
	for _, modern := range []bool{false, true} {
		b.release, b.recorded = make(chan struct{}), make(chan struct{})
		req := progressCall(t, srv.URL+"/mcp", token, modern)
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
		select {
		case got := <-body:
			if !strings.HasPrefix(got, "text/event-stream") || !strings.Contains(got, `"progress":1`) || !strings.Contains(got, `"text":"ok"`) {
				t.Fatalf("modern %v: want the progress and the result on a stream, got %s", modern, got)
			}
		case <-time.After(20 * time.Second):
			close(b.release)
			t.Fatalf("modern %v: the stream did not end while the bookkeeping waited", modern)
		}
		close(b.release)
		select {
		case <-b.recorded:
		case <-time.After(20 * time.Second):
			t.Fatalf("modern %v: the bookkeeping did not run", modern)
		}
	}
}

// progressCall is a call of echo with a progressToken: a modern
// request, or a legacy one on a session it initializes.
func progressCall(t *testing.T, url, token string, modern bool) *http.Request {
	t.Helper()
	post := func(body, version, session string) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", version)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		return req
	}
	if modern {
		req := post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},`+
			`"_meta":{"progressToken":"p1","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			"2026-07-28", "")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "echo")
		return req
	}
	resp, err := http.DefaultClient.Do(post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, "2025-11-25", ""))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize gave no session (status %d)", resp.StatusCode)
	}
	resp, err = http.DefaultClient.Do(post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "2025-11-25", sid))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{"progressToken":"p1"}}}`, "2025-11-25", sid)
}
