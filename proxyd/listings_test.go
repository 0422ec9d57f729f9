package proxyd

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// syncGate holds the daemon's publishes of the endpoint's lists.
type syncGate struct {
	mu   sync.Mutex
	open chan struct{} // closed: publishes pass
}

func newSyncGate() *syncGate {
	g := &syncGate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *syncGate) pass() {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	<-open
}

func (g *syncGate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

func (g *syncGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// TestStatusReadyMeansListed: once status calls a server ready, an MCP
// client that connects to the endpoint at once lists its tools. Each
// round adds a server by a reload with the endpoint's publish held until
// a status waits for it (or answers without waiting), the widest the
// window between the upstream's ready and the endpoint's listing can be.
func TestStatusReadyMeansListed(t *testing.T) {
	fx, err := mcpserver.Start(mcpserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fx.Close() })
	gate := newSyncGate()
	waiting := make(chan struct{}, 1)
	td := startDaemon(t, "", func(o *Options) {
		o.beforeSync = gate.pass
		o.awaitingList = func() {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
	})
	t.Cleanup(gate.release) // before the daemon stops: its sync loop must end
	for round := range 10 {
		name := fmt.Sprintf("fx%d", round)
		select {
		case <-waiting: // a heartbeat's, from the round before
		default:
		}
		gate.hold()
		cfg := fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: %s\n    url: %s\n", name, fx.URL())
		if err := os.WriteFile(td.configPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := td.client.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitfor.Cond(t, 20*time.Second, "status to call "+name+" ready", func() (bool, string) {
			answer := make(chan *api.Status, 1)
			go func() {
				st, err := td.client.Status(context.Background())
				if err != nil {
					t.Errorf("status: %v", err)
				}
				answer <- st
			}()
			var st *api.Status
			select {
			case st = <-answer: // answered while the publish is held
			case <-waiting:
				gate.release()
				st = <-answer
			}
			if st == nil {
				return false, "no status"
			}
			i := slices.IndexFunc(st.Servers, func(s api.ServerStatus) bool { return s.Name == name })
			if i < 0 {
				return false, fmt.Sprintf("%+v", st.Servers)
			}
			return st.Servers[i].State == api.StateReady, fmt.Sprintf("%+v", st.Servers[i])
		})
		cl := dialEndpoint(t, td, nil)
		res, err := cl.ListTools(context.Background(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(res.Tools, func(tl mcp.Tool) bool { return tl.Name == name+"__echo" }) {
			t.Fatalf("round %d: status says %s ready but the endpoint lists %d tools without %s__echo", round, name, len(res.Tools), name)
		}
		gate.release()
	}
}
