package probe_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/probe"
)

func TestConnsClosed(t *testing.T) {
	var open atomic.Int64
	s := server.NewMCPServer("x", "1", server.WithToolCapabilities(false))
	ts := httptest.NewUnstartedServer(server.NewStreamableHTTPServer(s))
	ts.Config.ConnState = func(c net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	ts.Start()
	defer ts.Close()
	rep := probe.Run(context.Background(), probe.Options{Target: ts.URL + "/mcp", Timeout: 2 * time.Second})
	t.Logf("%s", rep.Result.Code)
	waitfor.True(t, 2*time.Second, "the probe's connections to close", func() bool { return open.Load() == 0 })
	if n := open.Load(); n != 0 {
		t.Fatalf("%d connections left open", n)
	}
}
