package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// The downstream side of the soak: well-behaved MCP clients, whose calls
// must all succeed, and hostile ones, each a loop that runs until its
// context ends and closes everything it opened.

// tally counts outcomes of one kind of load.
type tally struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	errs       []string // the first few failures, for the report
}

func (t *tally) fail(format string, a ...any) {
	t.failed.Add(1)
	t.mu.Lock()
	if len(t.errs) < 5 {
		t.errs = append(t.errs, fmt.Sprintf(format, a...))
	}
	t.mu.Unlock()
}

// mcpClient starts and initializes an MCP client of proxyd's endpoint in
// the given protocol era.
func mcpClient(ctx context.Context, ci api.ConnectInfo, version string) (*client.Client, error) {
	tr, err := transport.NewStreamableHTTP(ci.URL, transport.WithHTTPHeaders(bearerHeader(ci)))
	if err != nil {
		return nil, err
	}
	c := client.NewClient(tr, client.WithProtocolVersion(version))
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: version, ClientInfo: mcp.Implementation{Name: "soak", Version: "1"},
	}}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// echoes calls the echo tool of well-behaved upstreams in turn and checks
// every answer: the calls proxyd must never fail, whatever else happens.
func echoes(ctx context.Context, ci api.ConnectInfo, version string, tools []string, n int, tl *tally) {
	c, err := mcpClient(ctx, ci, version)
	if err != nil {
		if ctx.Err() == nil {
			tl.fail("client %d (%s): %v", n, version, err)
		}
		return
	}
	defer c.Close()
	tick := time.NewTicker(5 * time.Millisecond) // a busy client, not a CPU flood
	defer tick.Stop()
	for i := 0; ctx.Err() == nil; i++ {
		<-tick.C
		tool := tools[i%len(tools)]
		text := fmt.Sprintf("soak-%d-%d", n, i)
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := c.CallTool(cctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": text}}})
		cancel()
		switch {
		case err != nil:
			tl.fail("%s (%s): %v", tool, version, err)
		case res.IsError || len(res.Content) == 0:
			tl.fail("%s (%s): %+v", tool, version, res.Content)
		default:
			if tc, ok := res.Content[0].(mcp.TextContent); !ok || tc.Text != text {
				tl.fail("%s (%s): answered %+v to %q", tool, version, res.Content[0], text)
			} else {
				tl.ok.Add(1)
			}
		}
	}
}

// hostileCalls calls the misbehaving upstreams and odd names; any outcome
// will do, as long as proxyd stays up and bounded.
func hostileCalls(ctx context.Context, ci api.ConnectInfo, tools []string, tl *tally) {
	c, err := mcpClient(ctx, ci, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	if err != nil {
		return
	}
	defer c.Close()
	for i := 0; ctx.Err() == nil; i++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.CallTool(cctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tools[i%len(tools)], Arguments: map[string]any{"text": "x", "ms": 3000}}})
		cancel()
		if err == nil {
			tl.ok.Add(1)
		} else {
			tl.failed.Add(1)
		}
	}
}

// cancellations start slow calls and give up on them at once.
func cancellations(ctx context.Context, ci api.ConnectInfo, tool string, tl *tally) {
	c, err := mcpClient(ctx, ci, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	if err != nil {
		return
	}
	defer c.Close()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for ctx.Err() == nil {
		<-tick.C
		cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		_, _ = c.CallTool(cctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: map[string]any{"ms": 2000}}})
		cancel()
		tl.ok.Add(1)
	}
}

// rawConns keeps up to max connections that sent a request without a
// token and got their 401, then sit idle.
func rawConns(ctx context.Context, addr string, max int, tl *tally) {
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			tl.failed.Add(1)
			continue
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := rawRequest(c, bufio.NewReader(c), "POST /mcp HTTP/1.1\r\nHost: "+addr+"\r\nContent-Length: 2\r\n\r\n{}"); err == nil {
			tl.ok.Add(1)
		}
		held = append(held, c)
		if len(held) > max {
			held[0].Close()
			held = held[1:]
		}
	}
}

// slowSenders send headers, or a body with the token, a byte at a time,
// until proxyd drops them.
func slowSenders(ctx context.Context, ci api.ConnectInfo, addr string, withBody bool, tl *tally) {
	for ctx.Err() == nil {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue
		}
		head := "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\n"
		drip := "X-Slow: " + strings.Repeat("s", 4096) + "\r\n"
		if withBody {
			head += ci.Header + "\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
			drip = strings.Repeat(" ", 4096)
		}
		_, _ = io.WriteString(c, head)
		closed := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, c); close(closed) }()
		tick := time.NewTicker(50 * time.Millisecond)
	drip:
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				break drip
			case <-closed:
				tl.ok.Add(1) // dropped by proxyd, as it should be
				break drip
			case <-tick.C:
				_, _ = io.WriteString(c, drip[i%len(drip):i%len(drip)+1])
			}
		}
		tick.Stop()
		c.Close()
		<-closed
	}
}

// hugeBodies post requests over the size limit, with the token.
func hugeBodies(ctx context.Context, ci api.ConnectInfo, size int, tl *tally) {
	body := echoCall(size)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for ctx.Err() == nil {
		<-tick.C
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ci.URL, strings.NewReader(body))
		for k, v := range bearerHeader(ci) {
			req.Header.Set(k, v)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusRequestEntityTooLarge {
			tl.ok.Add(1)
		} else {
			tl.fail("a %d-byte request got %d", size, resp.StatusCode)
		}
	}
}

// sessionFlood opens sessions and never ends them.
func sessionFlood(ctx context.Context, ci api.ConnectInfo, tl *tally) {
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer hc.CloseIdleConnections()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ci.URL, strings.NewReader(init))
		for k, v := range bearerHeader(ci) {
			req.Header.Set(k, v)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := hc.Do(req)
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		tl.ok.Add(1)
	}
}
