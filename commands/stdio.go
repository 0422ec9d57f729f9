package commands

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

var stdioCommand = &cli.Command{
	Name:  "stdio",
	Usage: "bridge a stdio MCP client to proxyd",
	Description: `Speaks MCP (newline-delimited JSON-RPC) on stdin/stdout and forwards every
message to proxyd's aggregated server over the control socket. Point a
client that only launches stdio servers at this command; no token is
needed because only your user can open the socket. Logs go to stderr.

Examples:
   mcpx stdio
   {"command": "mcpx", "args": ["stdio"]}   (in a client's server list)`,
	Action: runStdio,
}

func runStdio(c *cli.Context) error {
	sock := socketPath(c)
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	if _, err := newClient(c).Status(c.Context); err != nil {
		return daemonErr(err)
	}
	tr, err := transport.NewStreamableHTTP(api.MCPEndpoint,
		//lint:ignore SA1019 legacy-era clients listen on the standalone GET stream
		transport.WithHTTPBasicClient(hc), transport.WithContinuousListening(),
		transport.WithHTTPLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(c.Context)
	defer cancel()
	if err := tr.Start(ctx); err != nil {
		return fmt.Errorf("connecting to proxyd's MCP endpoint: %w", err)
	}
	defer tr.Close()
	b := &bridge{out: c.App.Writer, tr: tr}
	tr.SetNotificationHandler(func(n mcp.JSONRPCNotification) { b.write(n) })
	return b.run(ctx, os.Stdin)
}

type bridge struct {
	mu  sync.Mutex
	out io.Writer
	tr  *transport.StreamableHTTP
	wg  sync.WaitGroup
}

func (b *bridge) write(v any) {
	line, err := json.Marshal(v)
	if err != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	_, _ = b.out.Write(append(line, '\n'))
}

// message is any JSON-RPC message from the client.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      *mcp.RequestId  `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
}

func (b *bridge) run(ctx context.Context, in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), 64<<20)
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		if len(line) == 0 {
			continue
		}
		var m message
		if err := json.Unmarshal(line, &m); err != nil {
			b.write(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": mcp.PARSE_ERROR, "message": "parse error: " + err.Error()}})
			continue
		}
		switch {
		case m.Method == string(mcp.MethodInitialize) && m.ID != nil:
			// Nothing may overtake the handshake: it creates the session.
			b.request(ctx, m)
		case m.Method != "" && m.ID != nil:
			b.wg.Add(1)
			go func() { defer b.wg.Done(); b.request(ctx, m) }()
		case m.Method != "":
			n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: m.Method}}
			if len(m.Params) > 0 {
				_ = json.Unmarshal(m.Params, &n.Params)
			}
			_ = b.tr.SendNotification(ctx, n)
		}
		// Responses to server requests are not forwarded: proxyd sends none.
	}
	b.wg.Wait()
	return sc.Err()
}

func (b *bridge) request(ctx context.Context, m message) {
	var params any
	if len(m.Params) > 0 {
		params = m.Params
	}
	req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: *m.ID, Method: m.Method, Params: params}
	if v := metaProtocolVersion(m.Params); mcp.IsModernProtocol(v) {
		req.Header = http.Header{}
		for k, val := range mcp.StandardHeaders(v, mcp.MCPMethod(m.Method), m.Params) {
			req.Header.Set(k, val)
		}
	}
	resp, err := b.tr.SendRequest(ctx, req)
	if err != nil {
		b.write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": mcp.INTERNAL_ERROR, "message": "proxyd: " + err.Error()}})
		return
	}
	if m.Method == string(mcp.MethodInitialize) && resp.Error == nil {
		var r struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if json.Unmarshal(resp.Result, &r) == nil && r.ProtocolVersion != "" {
			b.tr.SetProtocolVersion(r.ProtocolVersion)
		}
	}
	b.write(resp)
}

func metaProtocolVersion(params json.RawMessage) string {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	var v string
	_ = json.Unmarshal(p.Meta[mcp.MetaKeyProtocolVersion], &v)
	return v
}
