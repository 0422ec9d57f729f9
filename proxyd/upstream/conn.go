// Package upstream keeps proxyd's connections to the configured MCP
// servers: one Conn per server, each with its own state machine,
// reconnect with capped exponential backoff, and an HTTP client whose
// transport chain mcpx controls.
package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"golang.org/x/sync/singleflight"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/internal/retryafter"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// Backoff bounds for reconnecting.
const (
	minBackoff     = time.Second
	maxBackoff     = time.Minute
	connectTimeout = 30 * time.Second
)

// Eras of the MCP protocol.
const (
	EraLegacy = "legacy"
	EraModern = "modern"
)

// ErrNotReady is returned for calls to a server that is not connected.
type ErrNotReady struct {
	Server, State, LastError string
	// SignIn: the server refused proxyd's credentials (HTTP 401), so the
	// fix is a sign-in, not a network repair.
	SignIn bool
}

func (e *ErrNotReady) Error() string {
	if e.LastError != "" {
		return fmt.Sprintf("server %q is %s: %s", e.Server, e.State, e.LastError)
	}
	return fmt.Sprintf("server %q is %s", e.Server, e.State)
}

// Conn is one upstream server.
type Conn struct {
	name string
	cfg  config.Server
	opts *Options

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	broken chan error    // a call saw the connection die
	kick   chan struct{} // reconnect now (reload, manual)

	mu         sync.RWMutex
	state      string
	lastErr    string
	since      time.Time
	nextRetry  time.Time
	attempts   int
	cl         *client.Client
	era        string
	version    string
	wire       wire // what each raw request carries, for cl
	serverInfo mcp.Implementation
	caps       mcp.ServerCapabilities
	tools      []Tool
	prompts    []mcp.Prompt
	resources  []mcp.Resource
	templates  []mcp.ResourceTemplate

	// sid is the session id of the established session (legacy era); it
	// keys the re-initialisation that replaces it. hc is the server's HTTP
	// client (the session drill sends DELETE with it).
	sid string
	hc  *http.Client

	// barrier is set while a session re-initialisation runs: new attempts
	// wait for it to close (see session.go).
	barrier atomic.Pointer[chan struct{}]
	flights singleflight.Group
	forged  atomic.Pointer[forgedSession]

	reinits  atomic.Int64
	inflight sync.WaitGroup
	child    child       // the stdio process, to explain an early exit
	signIn   atomic.Bool // the last connect failed for want of a sign-in
	closing  bool        // under mu: no new calls once close has begun

	// legacySeen: under protocol auto the server answered in the legacy
	// era, so later connections pin it and keep a GET listener open for
	// list_changed (mcp-go's listener rules out the modern probe).
	legacySeen atomic.Bool
}

func newConn(parent context.Context, s config.Server, opts *Options) *Conn {
	ctx, cancel := context.WithCancel(parent)
	c := &Conn{
		name: s.Name, cfg: s, opts: opts,
		ctx: ctx, cancel: cancel,
		done:   make(chan struct{}),
		broken: make(chan error, 1),
		kick:   make(chan struct{}, 1),
		state:  api.StateConnecting,
		since:  opts.now(),
	}
	if s.Disabled {
		c.state = api.StateDisabled
		close(c.done)
		return c
	}
	go c.run()
	return c
}

// Name is the server's configured name.
func (c *Conn) Name() string { return c.name }

// Config is the server's configuration.
func (c *Conn) Config() config.Server { return c.cfg }

func (c *Conn) setState(state, lastErr string) {
	c.mu.Lock()
	if c.state != state {
		c.since = c.opts.now()
	}
	c.state, c.lastErr = state, lastErr
	c.mu.Unlock()
	c.opts.logger().Debug("upstream state", "server", c.name, "state", state)
}

// run connects, waits for the connection to break, and reconnects with
// capped exponential backoff that honours the upstream's Retry-After.
func (c *Conn) run() {
	defer close(c.done)
	backoff := minBackoff
	for {
		retryAfter, err := c.connect()
		if c.ctx.Err() != nil {
			c.closeClient()
			return
		}
		if err == nil {
			backoff = minBackoff
			c.mu.Lock()
			c.attempts = 0
			c.nextRetry = time.Time{}
			c.mu.Unlock()
			c.opts.changed(c.name)
			select {
			case <-c.ctx.Done():
				c.closeClient()
				return
			case err := <-c.broken:
				c.opts.logger().Warn("upstream connection lost", "server", c.name, "err", err)
				c.closeClient()
				c.setState(api.StateConnecting, err.Error())
				c.opts.changed(c.name)
				continue
			case <-c.kick:
				c.closeClient()
				c.setState(api.StateConnecting, "")
				continue
			}
		}
		delay := backoff
		if retryAfter > delay {
			delay = retryAfter
		}
		if delay > maxBackoff && retryAfter <= maxBackoff {
			delay = maxBackoff
		}
		c.mu.Lock()
		c.attempts++
		c.nextRetry = c.opts.now().Add(delay)
		c.mu.Unlock()
		var authErr *callerr.AuthError
		c.signIn.Store(errors.Is(err, transport.ErrAuthorizationRequired) || errors.Is(err, transport.ErrOAuthAuthorizationRequired) ||
			errors.As(err, &authErr))
		c.setState(api.StateError, err.Error())
		c.opts.logger().Warn("upstream connect failed", "server", c.name, "err", err, "retry_in", delay.String())
		c.opts.changed(c.name)
		t := time.NewTimer(delay)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-c.kick:
			t.Stop()
		}
		if backoff *= 2; backoff > maxBackoff {
			backoff = maxBackoff
		}
		c.setState(api.StateConnecting, c.lastError())
	}
}

func (c *Conn) lastError() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.lastErr
}

// Reconnect drops the connection and connects again at once.
func (c *Conn) Reconnect() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *Conn) closeClient() {
	c.mu.Lock()
	cl := c.cl
	c.cl = nil
	c.sid = ""
	c.mu.Unlock()
	c.forged.Store(nil)
	if cl != nil {
		_ = cl.Close()
	}
}

// clientInfo is how proxyd introduces itself upstream.
func (c *Conn) clientInfo() mcp.Implementation {
	return mcp.Implementation{Name: "mcpx-proxyd", Version: c.opts.Version}
}

func (c *Conn) legacyPinned() bool {
	p := c.cfg.EffectiveProtocol()
	return p == config.ProtocolLegacy || (p == config.ProtocolAuto && c.legacySeen.Load())
}

// wrappers are the configured layers plus the session layer, innermost.
func (c *Conn) wrappers() []Wrapper {
	ws := append([]Wrapper(nil), c.opts.wrappers()...)
	return append(ws, func(_ string, next http.RoundTripper) http.RoundTripper {
		return &sessionTransport{next: next, conn: c}
	})
}

func (c *Conn) newTransport() (transport.Interface, error) {
	s := c.cfg
	switch s.EffectiveTransport() {
	case config.TransportStdio:
		env := childEnv(s.Env)
		stderr := c.child.tee(c.opts.stderr(c.name))
		return transport.NewStdioWithOptions(s.Command, env, s.Args,
			transport.WithCommandFunc(func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
				cmd := exec.CommandContext(ctx, command, args...)
				cmd.Env = env // never os.Environ(): the daemon's secrets stay home
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
				cmd.WaitDelay = 3 * time.Second
				c.child.set(cmd)
				return cmd, nil
			}),
			transport.WithCommandStderrWriter(stderr),
		), nil
	case config.TransportSSE:
		hc, err := newHTTPClient(s, c.opts.wrappers())
		if err != nil {
			return nil, err
		}
		return transport.NewSSE(s.URL, transport.WithHTTPClient(hc), transport.WithHeaders(s.Headers))
	default:
		hc, err := newHTTPClient(s, c.wrappers())
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.hc = hc
		c.mu.Unlock()
		opts := []transport.StreamableHTTPCOption{
			transport.WithHTTPBasicClient(hc),
			transport.WithHTTPHeaders(s.Headers),
			transport.WithHTTPLogger(c.opts.libraryLogger(c.name)),
		}
		if c.legacyPinned() {
			opts = append(opts, transport.WithContinuousListening())
		}
		return transport.NewStreamableHTTP(s.URL, opts...)
	}
}

// connect builds a client, initializes it in the configured era and lists
// what the server offers. It returns the Retry-After the server asked for.
func (c *Conn) connect() (time.Duration, error) {
	c.setState(api.StateConnecting, c.lastError())
	tr, err := c.newTransport()
	if err != nil {
		return 0, err
	}
	var copts []client.ClientOption
	switch {
	case c.legacyPinned():
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
	ra := &retryAfter{}
	ctx, cancel := context.WithTimeout(withRetryAfter(c.ctx, ra), connectTimeout)
	defer cancel()
	res, err := cl.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: "",
		ClientInfo:      c.clientInfo(),
		Capabilities:    mcp.ClientCapabilities{},
	}})
	if err != nil {
		c.child.settle()
		_ = cl.Close()
		return ra.get(), c.child.explain(fmt.Errorf("initialize: %w", describe(err)))
	}
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
		return c.connect()
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
	if era == EraModern && res.Capabilities.Tools != nil && res.Capabilities.Tools.ListChanged {
		if _, err := cl.ListenAsync(c.ctx, mcp.SubscriptionFilter{ToolsListChanged: true, PromptsListChanged: true, ResourcesListChanged: true}, nil); err != nil {
			c.opts.logger().Debug("subscriptions/listen not available", "server", c.name, "err", err)
		}
	}
	c.mu.Lock()
	c.cl = cl
	c.sid = cl.GetSessionId()
	c.era = era
	c.version = version
	c.wire = w
	c.serverInfo = res.ServerInfo
	c.caps = res.Capabilities
	c.tools, c.prompts, c.resources, c.templates = lists.tools, lists.prompts, lists.resources, lists.templates
	c.mu.Unlock()
	c.setState(api.StateReady, "")
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

func (c *Conn) onNotification(n mcp.JSONRPCNotification) {
	switch n.Method {
	case string(mcp.MethodNotificationToolsListChanged), string(mcp.MethodNotificationPromptsListChanged),
		string(mcp.MethodNotificationResourcesListChanged):
		go c.refreshLists()
	}
}

// refreshLists re-reads the server's lists after a list_changed (retried
// once after a re-established session).
func (c *Conn) refreshLists() {
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
			c.opts.logger().Warn("refreshing lists after list_changed", "server", c.name, "err", err)
		}
		return
	}
	c.mu.Lock()
	c.tools, c.prompts, c.resources, c.templates = l.tools, l.prompts, l.resources, l.templates
	c.mu.Unlock()
	c.opts.changed(c.name)
}

// client returns the live client or ErrNotReady.
func (c *Conn) client() (*client.Client, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.cl == nil || c.state != api.StateReady {
		return nil, &ErrNotReady{Server: c.name, State: c.state, LastError: c.lastErr, SignIn: c.state == api.StateError && c.signIn.Load()}
	}
	return c.cl, nil
}

// Era is the negotiated protocol era ("" until connected).
func (c *Conn) Era() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.era
}

// Tools is the current tool list.
func (c *Conn) Tools() []Tool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.tools
}

// Tool finds a tool by its upstream name.
func (c *Conn) Tool(name string) (Tool, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, t := range c.tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// Prompts is the current prompt list.
func (c *Conn) Prompts() []mcp.Prompt {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.prompts
}

// Resources is the current resource list.
func (c *Conn) Resources() []mcp.Resource {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.resources
}

// ResourceTemplates is the current resource template list.
func (c *Conn) ResourceTemplates() []mcp.ResourceTemplate {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.templates
}

// CallResult is a tools/call answered by the upstream (which may itself
// report isError). The result is kept as it came; the typed form is
// decoded only when someone needs it (the fast path never does).
type CallResult struct {
	Raw     json.RawMessage
	IsError bool

	once  sync.Once
	typed *mcp.CallToolResult
	err   error
}

// Typed decodes the result for the MCP library.
func (r *CallResult) Typed() (*mcp.CallToolResult, error) {
	r.once.Do(func() {
		r.typed, r.err = mcp.ParseCallToolResult(&r.Raw)
		if r.err != nil {
			r.err = fmt.Errorf("decoding tools/call result: %w", r.err)
		}
	})
	return r.typed, r.err
}

func (c *Conn) CallTool(ctx context.Context, name string, args json.RawMessage) (*CallResult, error) {
	if _, err := c.client(); err != nil {
		return nil, err
	}
	// Counted under mu, so no call starts once close has begun waiting.
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return nil, &ErrNotReady{Server: c.name, State: "closing"}
	}
	c.inflight.Add(1)
	c.mu.Unlock()
	defer c.inflight.Done()
	params, err := callParams(name, args)
	if err != nil {
		return nil, err
	}
	before, known := c.Tool(name)
	var raw json.RawMessage
	err = c.withSession(ctx, c.callRule(before, known), func(ctx context.Context, cl *client.Client) error {
		c.mu.RLock()
		w := c.wire
		c.mu.RUnlock()
		var err error
		raw, err = rawRequest(ctx, cl, w, string(mcp.MethodToolsCall), name, &before, params)
		return err
	})
	var sr *SessionReestablishedError
	if errors.As(err, &sr) {
		sr.Tool = name
	}
	if err != nil {
		return nil, err
	}
	// One cheap pass: the result must be an object, and isError decides
	// the classification.
	var head struct {
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("decoding tools/call result: %w", err)
	}
	return &CallResult{Raw: raw, IsError: head.IsError}, nil
}

// GetPrompt forwards prompts/get (retried once after a re-established session).
func (c *Conn) GetPrompt(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	var res *mcp.GetPromptResult
	err := c.withSession(ctx, nil, func(ctx context.Context, cl *client.Client) error {
		var err error
		res, err = cl.GetPrompt(ctx, req)
		return err
	})
	return res, err
}

// ReadResource forwards resources/read (retried once after a re-established session).
func (c *Conn) ReadResource(ctx context.Context, req mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	var res *mcp.ReadResourceResult
	err := c.withSession(ctx, nil, func(ctx context.Context, cl *client.Client) error {
		var err error
		res, err = cl.ReadResource(ctx, req)
		return err
	})
	return res, err
}

// checkBroken tells the run loop when an error means the connection is
// gone (a dead stdio child, a refused port), so it reconnects.
func (c *Conn) checkBroken(err error) {
	if err == nil || !connectionLost(err, c.cfg.EffectiveTransport()) {
		return
	}
	select {
	case c.broken <- err:
	default:
	}
}

func connectionLost(err error, tr string) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	if tr == config.TransportStdio {
		return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.EPIPE) ||
			errors.Is(err, os.ErrClosed) || strings.Contains(err.Error(), "file already closed") ||
			strings.Contains(err.Error(), "transport closed")
	}
	return false
}

// Status reports the server's state.
func (c *Conn) Status() api.ServerStatus {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s := api.ServerStatus{
		Name:            c.name,
		Transport:       c.cfg.EffectiveTransport(),
		Target:          c.target(),
		Protocol:        c.cfg.EffectiveProtocol(),
		Era:             c.era,
		ProtocolVersion: c.version,
		ServerName:      c.serverInfo.Name,
		ServerVersion:   c.serverInfo.Version,
		State:           c.state,
		LastError:       c.lastErr,
		Since:           c.since,
		Attempts:        c.attempts,
		Tools:           len(c.tools),
		Prompts:         len(c.prompts),
		Resources:       len(c.resources),
		Reinits:         c.reinits.Load(),
	}
	if !c.nextRetry.IsZero() && c.state == api.StateError {
		t := c.nextRetry
		s.NextRetry = &t
	}
	if c.cl != nil {
		if id := c.cl.GetSessionId(); id != "" {
			s.SessionID = prefix(id)
		}
	}
	return s
}

func (c *Conn) target() string {
	if c.cfg.EffectiveTransport() == config.TransportStdio {
		return redact.Text(strings.Join(append([]string{c.cfg.Command}, c.cfg.Args...), " "))
	}
	return redact.URL(c.cfg.URL)
}

func prefix(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// close stops the connection and waits for in-flight calls (bounded by ctx).
func (c *Conn) close(ctx context.Context) {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	waited := make(chan struct{})
	go func() { c.inflight.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
	}
	c.cancel()
	select {
	case <-c.done:
	case <-ctx.Done():
	}
	c.closeClient()
}

// retryAfter carries a 429/503 Retry-After seen while connecting.
type retryAfter struct {
	mu sync.Mutex
	d  time.Duration
}

func (r *retryAfter) set(d time.Duration) { r.mu.Lock(); r.d = d; r.mu.Unlock() }
func (r *retryAfter) get() time.Duration  { r.mu.Lock(); defer r.mu.Unlock(); return r.d }

type retryAfterKey struct{}

func withRetryAfter(ctx context.Context, r *retryAfter) context.Context {
	return context.WithValue(ctx, retryAfterKey{}, r)
}

// retryAfterTransport notes Retry-After on 429 and 503 answers to requests
// whose context asks for it (the connect path).
type retryAfterTransport struct{ next http.RoundTripper }

func (t retryAfterTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		if r, ok := req.Context().Value(retryAfterKey{}).(*retryAfter); ok {
			if d := retryafter.FromResponse(resp, time.Now()); d > 0 {
				r.set(d)
			}
		}
	}
	return resp, err
}
