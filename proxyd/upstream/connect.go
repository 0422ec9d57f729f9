package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// clientInfo is how proxyd introduces itself upstream.
func (c *Conn) clientInfo() mcp.Implementation {
	return mcp.Implementation{Name: "mcpx-proxyd", Version: c.opts.Version}
}

func (c *Conn) legacyPinned() bool {
	p := c.cfg.EffectiveProtocol()
	return p == config.ProtocolLegacy || (p == config.ProtocolAuto && c.legacySeen.Load())
}

// wrappers are the configured layers plus the session layer, innermost.
func (c *Conn) wrappers(conn uint64) []Wrapper {
	ws := append([]Wrapper(nil), c.opts.wrappers()...)
	return append(ws, func(_ string, next http.RoundTripper) http.RoundTripper {
		return standingTransport{next: next, list: &c.standing, route: c.standingMessage,
			failed: func(err error) { c.checkBroken(conn, err) }}
	}, func(_ string, next http.RoundTripper) http.RoundTripper {
		return &sessionTransport{next: next, conn: c}
	})
}

func (c *Conn) newTransport(conn uint64) (transport.Interface, error) {
	s := c.cfg
	// Header references are resolved at each connect, kept in memory only.
	hdrs, err := s.ResolvedHeaders()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.hdrs = hdrs
	c.mu.Unlock()
	switch s.EffectiveTransport() {
	case config.TransportStdio:
		return c.startChild(conn, s)
	case config.TransportSSE:
		link := &sseLink{answers: newAnswers()}
		ws := append(c.opts.wrappers(), func(_ string, next http.RoundTripper) http.RoundTripper {
			return standingTransport{next: next, list: &c.standing,
				route: func(m relay.Message) bool { return link.route(c, m) },
				onEnd: func(err error) { c.sseEnded(link, err) }}
		})
		hc, err := newHTTPClient(s, ws, c.streamBounds(conn), false)
		if err != nil {
			return nil, err
		}
		c.useHTTP(hc)
		tr, err := transport.NewSSE(s.URL, transport.WithHTTPClient(hc), transport.WithHeaders(hdrs),
			transport.WithSSELogger(c.opts.libraryLogger(c.name)))
		if err != nil {
			return nil, err
		}
		link.tr, link.hc = tr, hc
		return sseTransport{SSE: tr, link: link}, nil
	default:
		hc, err := newHTTPClient(s, c.wrappers(conn), c.streamBounds(conn), c.legacyPinned())
		if err != nil {
			return nil, err
		}
		c.useHTTP(hc)
		opts := []transport.StreamableHTTPCOption{
			transport.WithHTTPBasicClient(hc),
			transport.WithHTTPHeaders(hdrs),
			transport.WithHTTPLogger(c.opts.libraryLogger(c.name)),
		}
		if c.legacyPinned() {
			//lint:ignore SA1019 a server pinned to the legacy era listens on the standalone GET stream
			opts = append(opts, transport.WithContinuousListening())
		}
		return transport.NewStreamableHTTP(s.URL, opts...)
	}
}

// connect builds a client for connection number conn (see losses),
// initializes it in the configured era and lists what the server offers.
// It returns the Retry-After the server asked for.
func (c *Conn) connect(conn uint64) (time.Duration, error) {
	c.setState(api.StateConnecting, c.lastError())
	tr, err := c.newTransport(conn)
	if err != nil {
		return 0, err
	}
	copts := []client.ClientOption{client.WithClientCapabilities(relayedCapabilities()), client.WithRootsHandler(noRoots{})}
	switch {
	case c.legacyPinned():
		//lint:ignore SA1019 a server pinned to the legacy era needs the initialize handshake
		copts = append(copts, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION), client.WithLegacyProtocolOnly())
	case c.cfg.EffectiveProtocol() == config.ProtocolModern:
		copts = append(copts, client.WithProtocolVersion(mcp.LATEST_PROTOCOL_VERSION))
	}
	cl := client.NewClient(tr, copts...)
	// Start's context bounds the SSE stream, the GET listener and the stdio
	// child: it lives as long as the connection.
	if err := cl.Start(c.ctx); err != nil {
		_ = cl.Close()
		return 0, fmt.Errorf("starting %s transport: %w", c.cfg.EffectiveTransport(), err)
	}
	if b, ok := tr.(transport.BidirectionalInterface); ok {
		// Requests of the upstream outside a relayed call's own stream go
		// to the call they belong to (see routes); one it sends while
		// proxyd connects and lists is answered as outside any call, not
		// by the library's handlers (Start set them), which refuse what
		// they do not handle as an internal error.
		b.SetRequestHandler(c.onServerRequest)
	}
	ra := &retryAfter{}
	ctx, cancel := context.WithTimeout(withRetryAfter(c.ctx, ra), connectTimeout)
	defer cancel()
	res, err := cl.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: "",
		ClientInfo:      c.clientInfo(),
		Capabilities:    mcp.ClientCapabilities{},
	}})
	if err != nil {
		_ = cl.Close()
		return ra.get(), c.child.explain(fmt.Errorf("initialize: %w", describe(err)))
	}
	c.child.answered.Store(true) // a stdio child's stdout needs no watching now
	era := EraLegacy
	if mcp.IsModernProtocol(cl.ProtocolVersion()) {
		era = EraModern
	}
	if c.cfg.EffectiveProtocol() == config.ProtocolModern && era != EraModern {
		_ = cl.Close()
		return 0, fmt.Errorf("server speaks only the legacy era (%s) but protocol: modern is configured; set protocol: auto or legacy", cl.ProtocolVersion())
	}
	if era == EraLegacy && !c.legacyPinned() && c.cfg.EffectiveTransport() == config.TransportStreamableHTTP {
		// Learned the era: connect again, pinned, with the listener.
		_ = cl.Close()
		c.legacySeen.Store(true)
		return c.connect(conn)
	}
	// Read the client's fields before publishing it: once it is live, a
	// session re-initialisation may write them.
	version := cl.ProtocolVersion()
	w, err := newWire(cl, version, c.clientInfo())
	if err != nil {
		_ = cl.Close()
		return 0, err
	}
	lists, err := c.fetchLists(ctx, cl, w, res.Capabilities)
	if err != nil {
		_ = cl.Close()
		return ra.get(), err
	}
	cl.OnNotification(c.onNotification)
	c.mu.Lock()
	c.cl = cl
	c.connNo = conn
	c.sid = cl.GetSessionId()
	c.era = era
	c.version = version
	c.wire = w
	c.serverInfo = res.ServerInfo
	c.caps = res.Capabilities
	c.setListsLocked(lists)
	c.mu.Unlock()
	c.setState(api.StateReady, "")
	go c.reapplyLevel()
	go c.resubscribe()
	c.opts.logger().Info("upstream ready", "server", c.name, "era", era, "protocol", version,
		"server_name", res.ServerInfo.Name, "tools", len(lists.tools))
	return 0, nil
}

// usable drops tools whose x-mcp-header annotations break SEP-2243's
// rules (not a primitive, not a valid header token, duplicated): MCP
// clients must not call them, and the MCP library refuses to serve them.
func (c *Conn) usable(tools []Tool) []Tool {
	out := tools[:0:0]
	for _, t := range tools {
		if err := mcp.ValidateParamHeaderAnnotations(&t.Tool); err != nil {
			c.opts.logger().Warn("upstream tool left out: invalid x-mcp-header annotation", "server", c.name, "tool", t.Name, "err", err)
			continue
		}
		out = append(out, t)
	}
	return out
}

type lists struct {
	tools     []Tool
	prompts   []mcp.Prompt
	resources []mcp.Resource
	templates []mcp.ResourceTemplate
}

func (c *Conn) fetchLists(ctx context.Context, cl *client.Client, w wire, caps mcp.ServerCapabilities) (lists, error) {
	var l lists
	var err error
	if caps.Tools != nil {
		if l.tools, err = listToolsRaw(ctx, cl, w); err != nil {
			return l, fmt.Errorf("tools/list: %w", err)
		}
		l.tools = c.usable(l.tools)
	}
	// Prompts and resources are best effort: a server that advertises them
	// and fails to list them still serves its tools.
	if caps.Prompts != nil {
		if r, err := cl.ListPrompts(ctx, mcp.ListPromptsRequest{}); err == nil {
			l.prompts = r.Prompts
		}
	}
	if caps.Resources != nil {
		if r, err := cl.ListResources(ctx, mcp.ListResourcesRequest{}); err == nil {
			l.resources = r.Resources
		}
		if r, err := cl.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{}); err == nil {
			l.templates = r.ResourceTemplates
		}
	}
	return l, nil
}

// onNotification takes the upstream's notifications that arrive outside
// a relayed call's own stream (stdio, the GET stream, subscriptions).
// (The MCP library decoded it; a stdio child's come as they were, through
// stdioLink.)
func (c *Conn) onNotification(n mcp.JSONRPCNotification) {
	params, err := json.Marshal(n.Params)
	if err != nil {
		return
	}
	c.notification(n.Method, params)
}

// notification acts on a notification of the upstream outside a relayed
// call's own stream: lists re-read, progress and log messages to their
// call, a cancellation to the request it ends, the rest to proxyd's
// clients.
func (c *Conn) notification(method string, params json.RawMessage) {
	switch method {
	case string(mcp.MethodNotificationToolsListChanged), string(mcp.MethodNotificationPromptsListChanged),
		string(mcp.MethodNotificationResourcesListChanged):
		go func() { _ = c.refreshLists() }()
		return
	}
	if c.routeNotification(method, params) {
		return
	}
	if method == string(mcp.MethodNotificationCancelled) {
		if id := cancelledID(params); id != "" {
			c.routes.cancelAsk(id)
		}
		return
	}
	c.opts.notify(c.name, method, params)
}

// standingMessage takes a request or notification of the standing GET
// stream, as it came, once the connection is ready; before, only a call's
// notifications (see routeNotification). False leaves it to the library.
func (c *Conn) standingMessage(m relay.Message) bool {
	c.mu.RLock()
	cl, hc, w := c.cl, c.hc, c.wire
	c.mu.RUnlock()
	switch {
	case m.Method == "":
		return false // a response: the library's
	case cl == nil || hc == nil:
		return len(m.ID) == 0 && c.routeNotification(m.Method, m.Params)
	case len(m.ID) == 0:
		c.notification(m.Method, m.Params)
	default:
		c.serveRequest(m, nil, func(b []byte) { c.postMessage(cl, hc, w, cl.GetSessionId(), b) })
	}
	return true
}

// routeNotification passes a notification that came outside its call's
// own stream to the call, if it belongs to one; true when it is dealt
// with.
func (c *Conn) routeNotification(method string, params json.RawMessage) bool {
	switch method {
	case string(mcp.MethodNotificationProgress):
		// Progress after its call's end is dropped: the client's token
		// means nothing once the result is out.
		if x := c.routes.byToken(progressToken(params)); x != nil {
			x.notify(method, params)
		}
		return true
	case string(mcp.MethodNotificationMessage):
		// A log message belongs to the call in flight if there is only one.
		x := c.routes.only(func(x *exchange) bool { return x.ex.Handler != nil })
		return x != nil && x.notify(method, params)
	}
	return false
}

// relayedCapabilities are what proxyd declares upstream: everything it can
// relay to a client (each request goes to a client that declared it, or is
// refused).
func relayedCapabilities() mcp.ClientCapabilities {
	return mcp.ClientCapabilities{
		Roots: &struct {
			ListChanged bool `json:"listChanged,omitempty"`
		}{ListChanged: true}, // a client's notifications/roots/list_changed is passed on
		Sampling:    &mcp.SamplingCapability{},
		Elicitation: &mcp.ElicitationCapability{Form: &struct{}{}, URL: &struct{}{}},
	}
}

// noRoots answers the roots requests the MCP library takes itself (a
// modern server's input_required for proxyd's own list requests) as proxyd
// answers one outside any call: no client asked, so there are no roots.
// Without it the library answered an error.
type noRoots struct{}

func (noRoots) ListRoots(context.Context, mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	return &mcp.ListRootsResult{Roots: []mcp.Root{}}, nil
}

// refreshLists re-reads the server's lists after a list_changed or a
// listen stream opened again (retried once after a re-established
// session); the error says they were not.
func (c *Conn) refreshLists() error {
	ctx, cancel := context.WithTimeout(c.ctx, connectTimeout)
	defer cancel()
	var l lists
	err := c.withSession(ctx, nil, func(ctx context.Context, cl *client.Client) error {
		c.mu.RLock()
		caps, w := c.caps, c.wire
		c.mu.RUnlock()
		var err error
		l, err = c.fetchLists(ctx, cl, w, caps)
		return err
	})
	if err != nil {
		var nr *ErrNotReady
		if !errors.As(err, &nr) {
			c.opts.logger().Warn("reading the lists again", "server", c.name, "err", err)
		}
		return err
	}
	c.mu.Lock()
	c.setListsLocked(l)
	c.mu.Unlock()
	c.opts.changed(c.name)
	return nil
}

// reapplyLevel gives a new session the log level proxyd's clients want.
func (c *Conn) reapplyLevel() {
	ctx, cancel := context.WithTimeout(c.ctx, connectTimeout)
	defer cancel()
	c.applyLevel(ctx)
}
