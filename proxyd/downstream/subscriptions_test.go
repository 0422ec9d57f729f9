package downstream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/internal/waitfor"
)

// subBackend relays the clients' requests, holding their subscriptions
// and counting them.
type subBackend struct {
	countingBackend
	mu   sync.Mutex
	held map[string]int
	// With gate set, a Subscribe counts itself in entered and waits for
	// the gate to close before it holds the subscription.
	gate    chan struct{}
	entered atomic.Int64
}

func (b *subBackend) Subscribe(_ context.Context, _, uri string) error {
	if b.gate != nil {
		b.entered.Add(1)
		<-b.gate
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held[uri]++
	return nil
}

func (b *subBackend) Unsubscribe(_, uri string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held[uri]--; b.held[uri] == 0 {
		delete(b.held, uri)
	}
}

func (b *subBackend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, c := range b.held {
		n += c
	}
	return n
}

// A client's subscriptions are bounded: a URI's length, how many one
// client holds and how many all hold; a refusal names the bound, and
// what a client ends (an unsubscribe, its session) makes room again. A
// modern listen stream is acknowledged with what it got within them.
func TestSubscriptionsBounded(t *testing.T) {
	b := &subBackend{held: map[string]int{}}
	s, srv := startEndpoint(t, b)
	url := srv.URL + "/mcp"
	subscribe := func(sid, uri string) string {
		t.Helper()
		req := legacyRequest(t, url, sid, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"`+uri+`"}}`)
		_, body := roundTrip(t, req)
		return body
	}
	ok := func(body string) bool { return strings.Contains(body, `"result":{}`) }
	file := func(sess, i int) string { return fmt.Sprintf("file:///alpha/s%d-%d", sess, i) }

	first := legacySessionID(t, url)
	for i := range maxClientSubscriptions {
		if body := subscribe(first, file(0, i)); !ok(body) {
			t.Fatalf("subscription %d: %s", i+1, body)
		}
	}
	if body := subscribe(first, file(0, maxClientSubscriptions)); ok(body) || !strings.Contains(body, "holds 256 subscriptions") {
		t.Fatalf("a subscription past the client's bound: %s", body)
	}
	if body := subscribe(first, file(0, 7)); !ok(body) {
		t.Fatalf("a subscription the client holds already, at its bound: %s", body)
	}
	if body := subscribe(legacySessionID(t, url), "file:///alpha/"+strings.Repeat("x", maxSubscriptionURI)); ok(body) || !strings.Contains(body, "bytes long") {
		t.Fatalf("a URI over %d bytes: %s", maxSubscriptionURI, body)
	}

	// Sessions up to the bound of all subscriptions.
	sessions := []string{first}
	for n := 1; len(sessions)*maxClientSubscriptions < maxSubscriptionsInAll; n++ {
		sid := legacySessionID(t, url)
		sessions = append(sessions, sid)
		for i := range maxClientSubscriptions {
			if body := subscribe(sid, file(n, i)); !ok(body) {
				t.Fatalf("session %d, subscription %d: %s", n, i+1, body)
			}
		}
	}
	late := legacySessionID(t, url)
	if body := subscribe(late, "file:///alpha/late"); ok(body) || !strings.Contains(body, "clients hold 4096 subscriptions") {
		t.Fatalf("a subscription past the bound of all: %s", body)
	}
	if n := b.count(); n != maxSubscriptionsInAll {
		t.Fatalf("the backend holds %d subscriptions, want %d", n, maxSubscriptionsInAll)
	}
	// An unsubscribe makes room, and so does a session's end.
	req := legacyRequest(t, url, first, `{"jsonrpc":"2.0","id":3,"method":"resources/unsubscribe","params":{"uri":"`+file(0, 0)+`"}}`)
	if _, body := roundTrip(t, req); !ok(body) {
		t.Fatalf("unsubscribe: %s", body)
	}
	if body := subscribe(late, "file:///alpha/late"); !ok(body) {
		t.Fatalf("a subscription after an unsubscribe: %s", body)
	}
	del := legacyRequest(t, url, sessions[1], "")
	del.Method = http.MethodDelete
	if code, _ := roundTrip(t, del); code != http.StatusOK {
		t.Fatalf("DELETE: %d", code)
	}

	// A listen stream asking for more than one client's bound is
	// acknowledged with the bound's worth.
	uris := make([]string, maxClientSubscriptions+10)
	for i := range uris {
		uris[i] = `"` + file(99, i) + `"`
	}
	ack, _ := listen(t, url, uris...)
	if got := strings.Count(ack, "file:///alpha/s99-"); got != maxClientSubscriptions {
		t.Fatalf("the listen stream was acknowledged with %d URIs, want %d: %.300s", got, maxClientSubscriptions, ack)
	}
	if n, want := s.subscriptions.Load(), int64(maxSubscriptionsInAll); n != want {
		t.Fatalf("proxyd counts %d subscriptions, want %d", n, want)
	}
}

// A listen stream whose client does not read holds up no one: the
// upstream's reader that passes its updates on returns at once (it
// serves every other client of that server too), and what the stream
// lets wait is bounded.
func TestListenerNotReadingHoldsUpNoOne(t *testing.T) {
	b := &subBackend{held: map[string]int{}}
	s, srv := startEndpoint(t, b)
	const uri = "file:///alpha/readme.txt"
	ack, leave := listen(t, srv.URL+"/mcp", `"`+uri+`"`)
	if !strings.Contains(ack, uri) {
		t.Fatalf("the listen stream's acknowledgement: %q", ack)
	}
	// The client reads no more. Far more than the connection's buffers
	// hold: a reader writing to the stream itself would wait here.
	params := `{"uri":"` + uri + `","pad":"` + strings.Repeat("p", 64<<10) + `"}`
	const updates = 400
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range updates {
			s.Notify("alpha", "notifications/resources/updated", json.RawMessage(params))
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("passing %d updates (%d MiB) to a client that does not read did not return", updates, updates*len(params)>>20)
	}
	// What passed the bound is counted once the stream ends (here with
	// its client, which goes).
	leave()
	waitfor.Cond(t, 10*time.Second, "the updates past the bound counted", func() (bool, string) {
		n := s.ListenNotificationsDropped()
		return n > 0 && n < updates, fmt.Sprintf("%d dropped", n)
	})
}

// listen opens a modern client's subscriptions/listen stream for uris
// (JSON strings) and returns its acknowledgement's data line; the stream
// stays open, unread after it, until the test ends or leave is called
// (the client goes).
func listen(t *testing.T, url string, uris ...string) (ack string, leave func()) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":[` + strings.Join(uris, ",") +
		`]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data:") {
			return sc.Text(), cancel
		}
	}
	return "", cancel
}

// Subscribes of one session made at once stay within its bound: each
// keeps its place while the upstream is asked, so they cannot all pass
// the check before any is recorded.
func TestConcurrentSubscribesBounded(t *testing.T) {
	b := &subBackend{held: map[string]int{}, gate: make(chan struct{})}
	_, srv := startEndpoint(t, b)
	url := srv.URL + "/mcp"
	sid := legacySessionID(t, url)
	const tries = maxClientSubscriptions + 44
	var refused, ok atomic.Int64
	var wg sync.WaitGroup
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := legacyRequest(t, url, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":"file:///alpha/c%d"}}`, i+10, i))
			_, body := roundTrip(t, req)
			switch {
			case strings.Contains(body, `"result":{}`):
				ok.Add(1)
			case strings.Contains(body, "holds 256 subscriptions"):
				refused.Add(1)
			default:
				t.Errorf("subscribe %d: %s", i, body)
			}
		}()
	}
	// Every subscribe is either with the upstream or refused before the
	// upstream answers any.
	waitfor.Cond(t, 20*time.Second, "every subscribe asked upstream or refused", func() (bool, string) {
		n := b.entered.Load() + refused.Load()
		return n == tries, fmt.Sprintf("%d of %d", n, tries)
	})
	close(b.gate)
	wg.Wait()
	if ok.Load() != maxClientSubscriptions || b.count() != maxClientSubscriptions {
		t.Fatalf("%d subscribes taken, the backend holds %d; want the bound, %d", ok.Load(), b.count(), maxClientSubscriptions)
	}
}
