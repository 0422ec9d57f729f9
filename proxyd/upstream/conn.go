// Package upstream keeps proxyd's connections to the configured MCP
// servers: one Conn per server, each with its own state machine,
// reconnect with capped exponential backoff, and an HTTP client whose
// transport chain mcpx controls.
package upstream

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"golang.org/x/sync/singleflight"

	"github.com/mcpx-dev/mcpx/proxyd/api"
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
	Server    string
	State     api.State
	LastError string
	// SignIn: the server refused proxyd's credentials (HTTP 401), so the
	// fix is a sign-in, not a network repair.
	SignIn bool
}

func (e *ErrNotReady) Error() string {
	if e.LastError != "" {
		return fmt.Sprintf("server %q is %s: %s", e.Server, e.State.Phrase(), e.LastError)
	}
	return fmt.Sprintf("server %q is %s", e.Server, e.State.Phrase())
}

// Conn is one upstream server.
type Conn struct {
	name string
	cfg  config.Server
	opts *Options

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	losses losses        // what the run loop hears of its connection's loss
	kick   chan struct{} // reconnect now (reload, manual)

	mu        sync.RWMutex
	hdrs      map[string]string // the configured headers, references resolved
	state     api.State
	stateGen  uint64 // counts changes of state (see Generation)
	lastErr   string
	since     time.Time
	nextRetry time.Time
	attempts  int
	// failingSince is when the attempts failing since the last success
	// began: a retry passes through connecting, yet the server has been
	// in error since then.
	failingSince time.Time
	cl           *client.Client
	connNo       uint64 // cl's connection number (see losses)
	era          string
	version      string
	wire         wire // what each raw request carries, for cl
	serverInfo   mcp.Implementation
	caps         mcp.ServerCapabilities
	tools        []Tool
	toolAt       map[string]int // index of tools by name (see setToolsLocked)
	prompts      []mcp.Prompt
	resources    []mcp.Resource
	templates    []mcp.ResourceTemplate

	// sid is the session id of the established session (legacy era); it
	// keys the re-initialisation that replaces it. hc is the server's HTTP
	// client (the session drill sends DELETE with it).
	sid string
	hc  *http.Client

	// routes finds the relayed call a message of the upstream belongs to.
	routes routes
	// standing are the open standing GET streams, settled before a
	// call's result (see standing.go).
	standing standings
	// level is the log level proxyd's clients asked for (legacy era).
	level string

	// subs counts proxyd's clients subscribed to each resource URI;
	// stopListen ends a modern upstream's listen stream, and listenGen
	// counts the streams opened (all under subMu). listenEnds counts the
	// streams in a row that ended soon after they opened, for the delay
	// before the next.
	subMu      sync.Mutex
	subs       map[string]int
	stopListen func()
	listenGen  uint64
	listenEnds atomic.Int32

	// barrier is set while a session re-initialisation runs: new attempts
	// wait for it to close (see session.go).
	barrier atomic.Pointer[chan struct{}]
	flights singleflight.Group
	forged  atomic.Pointer[forgedSession]

	reinits  atomic.Int64
	dropped  atomic.Int64 // notifications dropped for calls' slow clients (see relay.Outbox)
	inflight sync.WaitGroup
	child    child       // the stdio process, to explain an early exit
	signIn   atomic.Bool // the last connect failed for want of a sign-in
	closing  bool        // under mu: no new calls once close has begun

	// legacySeen: under protocol auto the server answered in the legacy
	// era, so later connections pin it and keep a GET listener open for
	// list_changed (mcp-go's listener rules out the modern probe).
	legacySeen atomic.Bool
	breaches   breaches // limits broken in a row, pacing reconnects

	tries attempts // connection attempts, for ReconnectWait
}

func newConn(parent context.Context, s config.Server, opts *Options) *Conn {
	ctx, cancel := context.WithCancel(parent)
	c := &Conn{
		name: s.Name, cfg: s, opts: opts,
		ctx: ctx, cancel: cancel,
		done:   make(chan struct{}),
		losses: losses{wake: make(chan struct{}, 1)},
		subs:   map[string]int{},
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

// NotificationsDropped counts the server's notifications dropped for
// clients of its calls that did not read them (see relay.Outbox).
func (c *Conn) NotificationsDropped() int64 { return c.dropped.Load() }

// Config is the server's configuration.
func (c *Conn) Config() config.Server { return c.cfg }

func (c *Conn) setState(state api.State, lastErr string) {
	c.mu.Lock()
	if c.state != state {
		c.since = c.opts.now()
		if state == api.StateError && !c.failingSince.IsZero() {
			c.since = c.failingSince
		}
		c.stateGen++
	}
	c.state, c.lastErr = state, lastErr
	c.mu.Unlock()
	c.opts.logger().Debug("upstream state", "server", c.name, "state", state)
}

func (c *Conn) lastError() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.lastErr
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

// NotReady is the error a request to the server gets before it is sent
// while the server is not ready (*ErrNotReady), nil while it is.
func (c *Conn) NotReady() error {
	_, err := c.client()
	return err
}

// Era is the negotiated protocol era ("" until connected).
func (c *Conn) Era() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.era
}

// Modern reports whether the server speaks the modern (session-less) era.
func (c *Conn) Modern() bool { return c.Era() == EraModern }

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
	if i, ok := c.toolAt[name]; ok {
		return c.tools[i], true
	}
	return Tool{}, false
}

// setToolsLocked installs a new tool list (c.mu held) and its index: every
// call looks its tool up, and a server may list thousands.
func (c *Conn) setToolsLocked(tools []Tool) {
	at := make(map[string]int, len(tools))
	for i, t := range tools {
		if _, dup := at[t.Name]; !dup {
			at[t.Name] = i // the first of a name, as a scan would find
		}
	}
	c.tools, c.toolAt = tools, at
}

// setListsLocked installs all four lists (c.mu held).
func (c *Conn) setListsLocked(l lists) {
	c.setToolsLocked(l.tools)
	c.prompts, c.resources, c.templates = l.prompts, l.resources, l.templates
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

func prefix(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
