package proxyd

import (
	"fmt"
	"strings"
	"sync"

	"github.com/mcpx-dev/mcpx/internal/editdistance"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/downstream"
	"github.com/mcpx-dev/mcpx/proxyd/upstream"
)

// naming is who answers to which exposed name right now: the ready
// upstreams in configuration order (what the MCP endpoint serves). It
// costs in proportion to every server's tools (an upstream may have
// thousands), so it is worked out again only when a server's state, prefix
// or lists changed: 'mcpx status' stays fast.
func (d *Daemon) naming() downstream.Naming {
	var key strings.Builder
	for _, c := range d.mgr.List() {
		// A list is replaced, never changed in place: its address and
		// length tell a new one.
		ts, ps, rs, cfg := c.Tools(), c.Prompts(), c.Resources(), c.Config()
		fmt.Fprintf(&key, "%s\x00%s\x00%t\x00%p/%d\x00%p/%d\x00%p/%d\x00", c.Name(), cfg.ExposedPrefix(),
			c.State() == api.StateReady, ts, len(ts), ps, len(ps), rs, len(rs))
	}
	d.names.mu.Lock()
	defer d.names.mu.Unlock()
	if d.names.valid && d.names.key == key.String() {
		return d.names.naming
	}
	n := downstream.Name(d.Upstreams())
	d.names.key, d.names.naming, d.names.valid = key.String(), n, true
	return n
}

// namingCache is the last naming worked out and what it was worked out from.
type namingCache struct {
	mu     sync.Mutex
	valid  bool
	key    string
	naming downstream.Naming
}

// prefixes lists every configured server with its prefix, ready or not.
func (d *Daemon) prefixes() []downstream.Prefixed {
	var out []downstream.Prefixed
	for _, c := range d.mgr.List() {
		cfg := c.Config()
		out = append(out, downstream.Prefixed{Server: c.Name(), Prefix: cfg.ExposedPrefix()})
	}
	return out
}

// resolveTool turns what a command line names into a server and the
// upstream's tool name. With no server, tool is an exposed name. With a
// server, tool is the upstream's name or the exposed one. What cannot be
// resolved is returned as it came (the call then says why it is refused);
// an exposed name nobody answers to is attributed like an MCP client's.
func (d *Daemon) resolveTool(srv, tool string) (string, string) {
	if srv == "" {
		if e, ok := d.naming().Tools[tool]; ok {
			return e.Server, e.Name
		}
		if owner, name, ok := downstream.Owner(tool, d.prefixes()); ok {
			return owner, name
		}
		return "", tool
	}
	c, ok := d.mgr.Get(srv)
	if !ok {
		return srv, tool
	}
	if _, known := c.Tool(tool); known {
		return srv, tool
	}
	if e, ok := d.naming().Tools[tool]; ok && e.Server == srv {
		return srv, e.Name
	}
	cfg := c.Config()
	if p := cfg.ExposedPrefix(); p != "" && strings.HasPrefix(tool, p) {
		return srv, tool[len(p):]
	}
	return srv, tool
}

// serverNames lists every configured server.
func (d *Daemon) serverNames() []string {
	var out []string
	for _, s := range d.config().Servers {
		out = append(out, s.Name)
	}
	return out
}

// noServer is the one answer to a request naming a server that is not
// configured: not_found, with the nearest name when one is near.
func (d *Daemon) noServer(name string) error {
	return notFound("no server named %q%s (see 'mcpx servers')", name, editdistance.DidYouMean(name, d.serverNames()))
}

// toolHint is the nearest tool name of conn for a name it does not have,
// each name with prefix before it, in the form of editdistance.DidYouMean.
func toolHint(c *upstream.Conn, tool, prefix string) string {
	var names []string
	for _, t := range c.Tools() {
		names = append(names, prefix+t.Name)
	}
	return editdistance.DidYouMean(tool, names)
}
