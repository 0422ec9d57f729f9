package upstream

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// Options configure the Manager.
type Options struct {
	Version string
	Logger  *slog.Logger
	// Wrappers are added to every HTTP upstream's transport chain, first
	// outermost (call recorder, then bearer).
	Wrappers []Wrapper
	// OnChange is called (from any goroutine) when a server's state or
	// lists change.
	OnChange func(server string)
	// OnNotification receives the upstream notifications that belong to no
	// relayed call (resources/updated, log messages outside a call).
	OnNotification func(server, method string, params json.RawMessage)
	// Stderr receives a stdio child's stderr.
	Stderr func(server string) io.Writer
	Now    func() time.Time
}

func (o *Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o.Logger
}

// libraryLogger is the logger handed to mcp-go: its Info lines are
// chatter ("listening to server forever"), so only warnings pass, and
// some of its errors are routine for proxyd (libraryLevels).
func (o *Options) libraryLogger(server string) *slog.Logger {
	return slog.New(libraryHandler{o.logger().Handler(), slog.LevelWarn}).With("server", server)
}

// libraryLevels are the levels proxyd gives lines the MCP library logs as
// errors that report what proxyd handles and logs itself.
var libraryLevels = map[string]slog.Level{
	// A stream that ended (a listen stream cut, a server gone): proxyd
	// opens it again or loses the connection, and says so.
	"SSE stream error": slog.LevelDebug,
	// The legacy GET stream not opened, retried each second: a refusal
	// loses the connection (logged once); anything else is the server's
	// trouble, worth a warning, not an error of proxyd's.
	"failed to listen to server. retry in 1 second": slog.LevelWarn,
	// The session's DELETE when proxyd drops a client, failing because
	// the server is gone: proxyd has logged the lost connection.
	"failed to send close request": slog.LevelDebug,
	// A legacy server without the GET stream (405), which the spec
	// allows; one answering 404 instead deviates, worth a warning.
	"server does not support listening":     slog.LevelDebug,
	"session terminated, stopping listener": slog.LevelWarn,
}

// libraryHandler passes the library's lines at min and above, at the
// level libraryLevels gives them.
type libraryHandler struct {
	slog.Handler
	min slog.Level
}

func (h libraryHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h libraryHandler) Handle(ctx context.Context, r slog.Record) error {
	if l, ok := libraryLevels[r.Message]; ok && l < r.Level {
		if !h.Enabled(ctx, l) {
			return nil
		}
		r.Level = l
	}
	return h.Handler.Handle(ctx, r)
}

func (h libraryHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return libraryHandler{h.Handler.WithAttrs(a), h.min}
}

func (h libraryHandler) WithGroup(g string) slog.Handler {
	return libraryHandler{h.Handler.WithGroup(g), h.min}
}

func (o *Options) now() time.Time {
	if o.Now == nil {
		return time.Now()
	}
	return o.Now()
}

func (o *Options) changed(server string) {
	if o.OnChange != nil {
		o.OnChange(server)
	}
}

func (o *Options) notify(server, method string, params json.RawMessage) {
	if o.OnNotification != nil {
		o.OnNotification(server, method, params)
	}
}

func (o *Options) wrappers() []Wrapper { return o.Wrappers }

func (o *Options) stderr(server string) io.Writer {
	if o.Stderr == nil {
		return io.Discard
	}
	return o.Stderr(server)
}

// Manager owns the connections to all configured servers.
type Manager struct {
	opts Options
	ctx  context.Context
	stop context.CancelFunc

	mu    sync.RWMutex
	conns map[string]*Conn
	order []string
}

// NewManager returns an empty manager; Apply gives it servers.
func NewManager(opts Options) *Manager {
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{opts: opts, ctx: ctx, stop: cancel, conns: map[string]*Conn{}}
}

// Apply brings the connections in line with cfg: new servers connect,
// removed ones close, changed ones reconnect. Unchanged ones are untouched.
func (m *Manager) Apply(servers []config.Server) (added, removed, changed []string) {
	want := map[string]config.Server{}
	order := make([]string, 0, len(servers))
	for _, s := range servers {
		want[s.Name] = s
		order = append(order, s.Name)
	}
	var toClose []*Conn
	m.mu.Lock()
	for name, c := range m.conns {
		s, ok := want[name]
		switch {
		case !ok:
			removed = append(removed, name)
			toClose = append(toClose, c)
			delete(m.conns, name)
		case !reflect.DeepEqual(s, c.cfg):
			changed = append(changed, name)
			toClose = append(toClose, c)
			m.conns[name] = newConn(m.ctx, s, &m.opts)
		}
	}
	for _, name := range order {
		if _, ok := m.conns[name]; !ok {
			added = append(added, name)
			m.conns[name] = newConn(m.ctx, want[name], &m.opts)
		}
	}
	m.order = order
	m.mu.Unlock()
	for _, c := range toClose {
		go func(c *Conn) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c.close(ctx)
		}(c)
	}
	sort.Strings(added)
	sort.Strings(removed)
	sort.Strings(changed)
	for _, n := range append(append(append([]string{}, added...), removed...), changed...) {
		m.opts.changed(n)
	}
	return added, removed, changed
}

// Get returns the named connection.
func (m *Manager) Get(name string) (*Conn, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c, ok := m.conns[name]
	return c, ok
}

// List returns the connections in configuration order.
func (m *Manager) List() []*Conn {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*Conn, 0, len(m.order))
	for _, n := range m.order {
		if c, ok := m.conns[n]; ok {
			out = append(out, c)
		}
	}
	return out
}

// Close drains in-flight calls (bounded by ctx) and closes every upstream.
func (m *Manager) Close(ctx context.Context) {
	m.mu.Lock()
	conns := make([]*Conn, 0, len(m.conns))
	for _, c := range m.conns {
		conns = append(conns, c)
	}
	m.conns = map[string]*Conn{}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func(c *Conn) { defer wg.Done(); c.close(ctx) }(c)
	}
	wg.Wait()
	m.stop()
}
