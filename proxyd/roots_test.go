package proxyd

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/internal/waitfor"
)

type rootsLister struct{}

func (rootsLister) ListRoots(context.Context, mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	return &mcp.ListRootsResult{Roots: []mcp.Root{{URI: "file:///work", Name: "work"}}}, nil
}

// TestRootsListChangedReachesTheUpstreamsThatAsked: a legacy client's
// notifications/roots/list_changed goes to the upstream sessions that asked
// it for its roots, and to no other.
func TestRootsListChangedReachesTheUpstreamsThatAsked(t *testing.T) {
	up := startRelayUpstream(t)
	// Two connections to the same server: two upstream sessions.
	td := startDaemon(t, fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: a\n    url: %s\n    protocol: legacy\n  - name: b\n    url: %s\n    protocol: legacy\n", up.url, up.url))
	waitReady(t, td, "a")
	waitReady(t, td, "b")
	cl := dialRelay(t, td, mcp.ProtocolVersion20251125, client.WithRootsHandler(rootsLister{}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cl.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "a__roots"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := toolText(t, res); got != "file:///work" {
		t.Fatalf("the upstream got roots %q, want the client's", got)
	}
	asked, _ := up.sessions()
	if len(asked) != 1 {
		t.Fatalf("%d upstream sessions asked for roots, want 1", len(asked))
	}
	if err := cl.RootListChanges(ctx); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, 10*time.Second, "the upstream session that asked to hear the roots changed", func() (bool, string) {
		_, changed := up.sessions()
		return slices.Contains(changed, asked[0]), fmt.Sprintf("notified %v, asked %v", changed, asked)
	})
	// A call through b after the notification went out: had b's session
	// been told too, it would have heard it by the time b answers.
	if _, err := cl.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "b__progress"}}); err != nil {
		t.Fatal(err)
	}
	if _, changed := up.sessions(); len(changed) != 1 {
		t.Errorf("sessions told the roots changed: %v, want only %v", changed, asked)
	}
}
