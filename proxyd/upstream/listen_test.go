package upstream

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/syncbuf"
	"github.com/mcpx-dev/mcpx/internal/tcpproxy"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// startCutter forwards to target through a proxy whose connections the
// test can cut (see tcpproxy).
func startCutter(t *testing.T, target string) *tcpproxy.Proxy {
	t.Helper()
	p, err := tcpproxy.Start(target, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// A modern upstream's subscriptions/listen stream that ends (cut here
// between proxyd and the server) is opened again, and the lists read
// again for what changed meanwhile: a list change made after the cut
// still reaches proxyd. It used to end for good, logged at debug, with
// the server still ready.
func TestListenStreamOpenedAgain(t *testing.T) {
	fx, cut, c, changes := modernBehindCutter(t, nil)
	seenChange(t, fx, c, changes, "before the cut")
	cut.Cut()
	seenChange(t, fx, c, changes, "after the cut")
	if st := c.Status(); st.State != api.StateReady {
		t.Fatalf("state %s after the stream was opened again", st.State)
	}
}

// modernBehindCutter connects proxyd (pinned modern) to a modern fixture
// through a cutter; changes hears each server whose lists changed.
func modernBehindCutter(t *testing.T, logger *slog.Logger) (fx *mcpserver.Server, cut *tcpproxy.Proxy, c *Conn, changes chan string) {
	t.Helper()
	fx = startFixture(t, mcpserver.EraModern)
	u, err := url.Parse(fx.URL())
	if err != nil {
		t.Fatal(err)
	}
	cut = startCutter(t, u.Host)
	u.Host = cut.Addr()
	c, changes = watchedModern(t, u.String(), logger)
	return fx, cut, c, changes
}

// watchedModern connects proxyd (pinned modern) to the server at url and
// waits for it; changes hears each server whose lists changed.
func watchedModern(t *testing.T, url string, logger *slog.Logger) (*Conn, chan string) {
	t.Helper()
	changes := make(chan string, 16)
	m := newManagerWith(t, Options{Version: "test", Logger: logger, OnChange: func(s string) {
		select {
		case changes <- s:
		default:
		}
	}}, config.Server{Name: "fx", URL: url, Protocol: config.ProtocolModern})
	c, _ := m.Get("fx")
	waitState(t, c, api.StateReady)
	return c, changes
}

// A listen stream that ended is opened again even when the server failed
// the lists' read that comes first (here tools/list answered 503 once):
// the stream is the news of the server's next change.
func TestListenStreamOpenedAgainAfterAFailedRead(t *testing.T) {
	fx := startFixture(t, mcpserver.EraModern)
	target, err := url.Parse(fx.URL())
	if err != nil {
		t.Fatal(err)
	}
	var failLists atomic.Int32
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/list" && failLists.Add(-1) >= 0 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	cut := startCutter(t, front.Listener.Addr().String())
	u := *target
	u.Host = cut.Addr()
	c, changes := watchedModern(t, u.String(), nil)
	seenChange(t, fx, c, changes, "before the cut")
	failLists.Store(1)
	cut.Cut()
	seenChange(t, fx, c, changes, "after the cut")
	if failLists.Load() >= 0 {
		t.Fatal("no tools/list was refused: the read after the cut was not made")
	}
}

// seenChange changes the fixture's echo tool description until proxyd has
// it (a listen stream opens just after the server is ready; a change
// before it is not announced).
func seenChange(t *testing.T, fx *mcpserver.Server, c *Conn, changes <-chan string, phase string) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		want := fmt.Sprintf("%s %d", phase, n)
		if err := fx.SetToolDescription("echo", want); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changes:
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: the changed tool list never reached proxyd", phase)
		}
		if tl, _ := c.Tool("echo"); strings.HasPrefix(tl.Description, phase) {
			return
		}
	}
}

// A modern server that went away is lost without waiting for a call when
// proxyd holds its listen stream: the stream ends, opening it again is
// refused, and the connection is lost as a call's refusal loses it.
func TestModernServerGoneWithoutCallsIsLost(t *testing.T) {
	fx := startFixture(t, mcpserver.EraModern)
	m := newManager(t, config.Server{Name: "fx", URL: fx.URL(), Protocol: config.ProtocolModern})
	c, _ := m.Get("fx")
	waitState(t, c, api.StateReady)
	fx.Close()
	st := waitState(t, c, api.StateError)
	if !strings.Contains(st.LastError, "connection refused") {
		t.Fatalf("last error %q, want the refusal", st.LastError)
	}
}

// A modern server that went away and came back is connected to again and
// kept: a loss reported again after the lost connection's end, by the
// ended listen stream or another request of that connection, is not
// taken for the next connection's.
func TestModernServerBackIsKept(t *testing.T) {
	logs := &syncbuf.Buffer{}
	fx, cut, c, changes := modernBehindCutter(t, slog.New(slog.NewTextHandler(logs, nil)))
	seenChange(t, fx, c, changes, "first connection")
	c.mu.RLock()
	first := c.connNo
	c.mu.RUnlock()
	cut.Down()
	waitState(t, c, api.StateError)
	// A request of the lost connection reports the loss again, late (as
	// two that failed together do).
	c.checkBroken(first, fmt.Errorf("tools/list: %w", syscall.ECONNREFUSED))
	if err := cut.Up(); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, api.StateReady)
	// The new connection's stream carries a change: by then a stale
	// report of the old loss would have dropped the connection.
	seenChange(t, fx, c, changes, "second connection")
	if n := strings.Count(logs.String(), "upstream connection lost"); n != 1 {
		t.Fatalf("the connection was lost %d times, want once:\n%s", n, logs.String())
	}
}
