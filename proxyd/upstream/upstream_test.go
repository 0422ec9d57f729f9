package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

func startFixture(t *testing.T, era mcpserver.Era) *mcpserver.Server {
	t.Helper()
	srv, err := mcpserver.Start(mcpserver.Options{Era: era})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// waitState polls until the server reaches want (bounded).
func waitState(t testing.TB, c *Conn, want api.State) api.ServerStatus {
	t.Helper()
	var st api.ServerStatus
	waitfor.Cond(t, 20*time.Second, "server "+c.Name()+" to be "+string(want), func() (bool, string) {
		st = c.Status()
		return st.State == want, fmt.Sprintf("state %s (last error %q)", st.State, st.LastError)
	})
	return st
}

func newManager(t *testing.T, servers ...config.Server) *Manager {
	t.Helper()
	return newManagerWith(t, Options{Version: "test"}, servers...)
}

// newManagerWith is newManager with opts.
func newManagerWith(t *testing.T, opts Options, servers ...config.Server) *Manager {
	t.Helper()
	m := NewManager(opts)
	m.Apply(servers)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m.Close(ctx)
	})
	return m
}

func TestConnectBothEras(t *testing.T) {
	tests := []struct {
		name     string
		fixture  mcpserver.Era
		protocol string
		wantEra  string
	}{
		{"auto against both settles modern", mcpserver.EraBoth, config.ProtocolAuto, EraModern},
		{"legacy pinned", mcpserver.EraBoth, config.ProtocolLegacy, EraLegacy},
		{"auto against legacy-only", mcpserver.EraLegacy, config.ProtocolAuto, EraLegacy},
		{"modern pinned", mcpserver.EraModern, config.ProtocolModern, EraModern},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := startFixture(t, tt.fixture)
			m := newManager(t, config.Server{Name: "fx", URL: fx.URL(), Protocol: tt.protocol})
			c, _ := m.Get("fx")
			st := waitState(t, c, api.StateReady)
			if st.Era != tt.wantEra {
				t.Fatalf("era %q, want %q", st.Era, tt.wantEra)
			}
			if st.Tools == 0 {
				t.Fatal("no tools listed")
			}
			echo, ok := c.Tool("echo")
			if !ok || !echo.ReadOnly() {
				t.Fatalf("echo missing or not read-only: %+v", echo)
			}
			if len(echo.RawInputSchema) == 0 {
				t.Fatal("echo's input schema was not kept verbatim")
			}
			res, err := c.CallTool(context.Background(), "echo", json.RawMessage(`{"text":"hi"}`))
			if err != nil {
				t.Fatal(err)
			}
			typed, err := res.Typed()
			if err != nil || res.IsError || len(typed.Content) == 0 {
				t.Fatalf("unexpected result %s", res.Raw)
			}
			if got := fx.Executions("echo"); got != 1 {
				t.Fatalf("fixture executed echo %d times, want 1", got)
			}
		})
	}
}

func TestModernPinnedAgainstLegacyOnlyIsAnError(t *testing.T) {
	fx := startFixture(t, mcpserver.EraLegacy)
	m := newManager(t, config.Server{Name: "fx", URL: fx.URL(), Protocol: config.ProtocolModern})
	c, _ := m.Get("fx")
	st := waitState(t, c, api.StateError)
	if st.LastError == "" || st.NextRetry == nil {
		t.Fatalf("want a last error and a retry time, got %+v", st)
	}
}

// unreachable returns a server whose upstream is gone, once its first
// attempt has failed, and the status that attempt left.
func unreachable(t *testing.T) (*Conn, api.ServerStatus) {
	t.Helper()
	fx := startFixture(t, mcpserver.EraBoth)
	url := fx.URL()
	fx.Close()
	m := newManager(t, config.Server{Name: "fx", URL: url})
	c, _ := m.Get("fx")
	return c, waitState(t, c, api.StateError)
}

func TestUnreachableThenRecovers(t *testing.T) {
	c, st := unreachable(t)
	if st.Attempts < 1 {
		t.Fatalf("attempts %d", st.Attempts)
	}
	if _, err := c.CallTool(context.Background(), "echo", nil); err == nil {
		t.Fatal("a call to a server in error must fail before dispatch")
	}
}

// A legacy server that goes away while no call is made shows as such:
// the library's GET stream, opened again every second, is refused, and
// that loses the connection (it stayed ready, and the library logged the
// refusal every second, until a call failed).
func TestServerGoneWithoutCallsIsLost(t *testing.T) {
	fx := startLegacyFixture(t, 0)
	c := legacyConn(t, fx, nil)
	fx.Close()
	st := waitState(t, c, api.StateError)
	if !strings.Contains(st.LastError, "connection refused") {
		t.Fatalf("last error %q, want the refusal", st.LastError)
	}
}

// TestErrorSinceTheFirstFailure: a server failing attempt after attempt
// has been in error since the first failure, though each retry passes
// through connecting.
func TestErrorSinceTheFirstFailure(t *testing.T) {
	c, first := unreachable(t)
	var st api.ServerStatus
	waitfor.Cond(t, 20*time.Second, "a second failed attempt", func() (bool, string) {
		st = c.Status()
		return st.State == api.StateError && st.Attempts >= 2, fmt.Sprintf("state %s, %d attempts", st.State, st.Attempts)
	})
	if !st.Since.Equal(first.Since) {
		t.Errorf("error since %s after %d attempts, want %s (the first failure)", st.Since, st.Attempts, first.Since)
	}
}

func TestApplyAddRemoveChange(t *testing.T) {
	fx := startFixture(t, mcpserver.EraBoth)
	m := newManager(t)
	var mu sync.Mutex
	changed := map[string]int{}
	m.opts.OnChange = func(s string) { mu.Lock(); changed[s]++; mu.Unlock() }
	added, removed, ch := m.Apply([]config.Server{{Name: "a", URL: fx.URL()}, {Name: "b", URL: fx.URL(), Disabled: true}})
	if len(added) != 2 || len(removed) != 0 || len(ch) != 0 {
		t.Fatalf("added %v removed %v changed %v", added, removed, ch)
	}
	b, _ := m.Get("b")
	if b.Status().State != api.StateDisabled {
		t.Fatalf("b state %s", b.Status().State)
	}
	a, _ := m.Get("a")
	waitState(t, a, api.StateReady)
	added, removed, ch = m.Apply([]config.Server{{Name: "a", URL: fx.URL(), Protocol: config.ProtocolLegacy}})
	if len(added) != 0 || len(removed) != 1 || len(ch) != 1 {
		t.Fatalf("added %v removed %v changed %v", added, removed, ch)
	}
	a2, _ := m.Get("a")
	if a2 == a {
		t.Fatal("a changed server must get a new connection")
	}
	if st := waitState(t, a2, api.StateReady); st.Era != EraLegacy {
		t.Fatalf("era %s", st.Era)
	}
	if _, ok := m.Get("b"); ok {
		t.Fatal("b was removed")
	}
}

// TestStdioCrashingChild: a child that dies during the handshake is
// explained by how it ended and its last stderr line, also when that line
// comes well after the first (the whole stream is read before the cause is
// written down).
func TestStdioCrashingChild(t *testing.T) {
	for _, tc := range []struct{ name, script string }{
		{"one line", "echo boom: missing API key >&2; exit 3"},
		{"last line late", "echo starting >&2; sleep 0.2; echo boom: missing API key >&2; exit 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, config.Server{Name: "crash", Command: "sh", Args: []string{"-c", tc.script}})
			c, _ := m.Get("crash")
			st := waitState(t, c, api.StateError)
			if !strings.Contains(st.LastError, "exit status 3") || !strings.Contains(st.LastError, "boom: missing API key") {
				t.Fatalf("last error %q does not say how the child ended", st.LastError)
			}
		})
	}
}

// A child that writes to stdout what is not JSON-RPC (a banner, its
// logs), which the library skips without a word, has those lines named
// in its error, with how it ended; a JSON line is not one of them.
func TestStdioStrayStdout(t *testing.T) {
	script := `echo '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}'; ` +
		`echo 'Server listening on stdio'; printf '  INFO ready\n'; read -r line; echo boom >&2; exit 3`
	m := newManager(t, config.Server{Name: "chatty", Command: "sh", Args: []string{"-c", script}})
	c, _ := m.Get("chatty")
	st := waitState(t, c, api.StateError)
	for _, want := range []string{"exit status 3", "boom", "not JSON-RPC", `"Server listening on stdio", "INFO ready"`} {
		if !strings.Contains(st.LastError, want) {
			t.Errorf("last error %q lacks %q", st.LastError, want)
		}
	}
	if strings.Contains(st.LastError, "notifications/message") {
		t.Errorf("last error %q names a JSON-RPC line", st.LastError)
	}
	// A shortened cause keeps the last link of the chain: it must say
	// what happened, not be the quoted lines alone.
	if last := st.LastError[strings.LastIndex(st.LastError, ": ")+2:]; !strings.Contains(last, "wrote lines to stdout") {
		t.Errorf("the error's last link is %q, not the statement", last)
	}
}

// A child that neither answers nor exits when its stdin closes is ended
// by proxyd, and its error says so rather than only "signal: terminated".
func TestStdioChildEndedByProxyd(t *testing.T) {
	c := &Conn{ctx: context.Background(), name: "deaf", opts: &Options{}}
	tr, err := c.startChild(1, config.Server{Name: "deaf", Command: "sh", Args: []string{"-c", "echo not-json-rpc; exec sleep 60"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, 10*time.Second, "the stray line read", func() bool {
		c.child.mu.Lock()
		defer c.child.mu.Unlock()
		return len(c.child.stray) > 0
	})
	_ = tr.Close()
	got := c.child.explain(errors.New("initialize: timeout")).Error()
	for _, want := range []string{"proxyd ended it", "signal: terminated", `"not-json-rpc"`} {
		if !strings.Contains(got, want) {
			t.Errorf("error %q lacks %q", got, want)
		}
	}
}

func TestChildEnvIsMinimal(t *testing.T) {
	t.Setenv("MCPX_TEST_SECRET", "canary-secret-value")
	env := childEnv(map[string]string{"LOG_LEVEL": "warn"})
	for _, kv := range env {
		if kv == "MCPX_TEST_SECRET=canary-secret-value" {
			t.Fatal("the daemon's environment leaked to the child")
		}
	}
	found := false
	for _, kv := range env {
		found = found || kv == "LOG_LEVEL=warn"
	}
	if !found {
		t.Fatal("configured env missing")
	}
}

func TestListChangedPropagates(t *testing.T) {
	for _, protocol := range []string{config.ProtocolAuto, config.ProtocolLegacy} {
		t.Run(protocol, func(t *testing.T) {
			fx := startFixture(t, mcpserver.EraBoth)
			changes := make(chan string, 16)
			m := NewManager(Options{Version: "test", OnChange: func(s string) {
				select {
				case changes <- s:
				default:
				}
			}})
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				m.Close(ctx)
			})
			m.Apply([]config.Server{{Name: "fx", URL: fx.URL(), Protocol: protocol}})
			c, _ := m.Get("fx")
			waitState(t, c, api.StateReady)
			seenChange(t, fx, c, changes, "changed description")
		})
	}
}
