package oauth

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/fixtures/authserver"
	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/discovery"
)

// The full chain with a real MCP client: the fixture MCP server accepts
// only live tokens of the fixture authorization server; an mcp-go client
// whose http.Client carries the bearer transport makes 50 concurrent tool
// calls while a proactive refresh runs, on an expired token.
func TestMCPClientCallsAtExpiry(t *testing.T) {
	as, err := authserver.Start(authserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer as.Close()
	as.Hold(50 * time.Millisecond)
	ms, err := mcpserver.Start(mcpserver.Options{ValidateToken: as.Validate, AuthorizationServers: []string{as.URL()}, Scopes: []string{"read"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := discovery.New(nil)
	res, err := d.Discover(ctx, ms.URL(), nil, discovery.Overrides{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := NewStore(openDB(t))
	c := NewCoordinator(store, CoordinatorOptions{})
	key := ServerKey("fixture", ms.URL())
	c.Sync(map[string]GrantSource{key: {Server: "fixture", Resource: res.ResourceIndicator, TokenEndpoint: TokenEndpointFrom(d, ms.URL(), discovery.Overrides{})}})
	b := &browser{}
	if _, err := c.Login(ctx, LoginRequest{Key: key, Server: "fixture", Discovery: res, OpenURL: b.open}); err != nil {
		t.Fatal(err)
	}

	hc := &http.Client{Transport: NewBearerTransport(nil, c, key)}
	mc, err := client.NewStreamableHttpClient(ms.URL(), transport.WithHTTPBasicClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	if err := mc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if err := c.ExpireAccessToken(ctx, key); err != nil {
		t.Fatal(err)
	}
	as.ResetCounters()
	old, _ := store.Token(ctx, key)

	var wg sync.WaitGroup
	var failed atomic.Int32
	start := make(chan struct{})
	for range 50 {
		wg.Go(func() {
			<-start
			req := mcp.CallToolRequest{}
			req.Params.Name = "echo"
			req.Params.Arguments = map[string]any{"text": "hi"}
			if _, err := mc.CallTool(ctx, req); err != nil {
				failed.Add(1)
				t.Log(err)
			}
		})
	}
	wg.Go(func() {
		<-start
		if _, err := c.Refresh(ctx, key, TriggerProactive, nil); err != nil {
			failed.Add(1)
		}
	})
	close(start)
	wg.Wait()
	if n := as.TokenRequests(); n != 1 || failed.Load() != 0 {
		t.Fatalf("token requests %d, failed calls %d", n, failed.Load())
	}
	if as.GrantRevoked(old.RefreshToken) {
		t.Fatal("grant revoked")
	}
	for _, r := range as.TokenRequestLog() {
		if r.ClientID == "" || r.Resource != res.ResourceIndicator {
			t.Fatalf("token request = %+v", r)
		}
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "echo"
	req.Params.Arguments = map[string]any{"text": "again"}
	if _, err := mc.CallTool(ctx, req); err != nil {
		t.Fatalf("follow-up call: %v", err)
	}
}
