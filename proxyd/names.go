package proxyd

import (
	"strings"

	"github.com/mcpx-dev/mcpx/internal/editdistance"
	"github.com/mcpx-dev/mcpx/proxyd/downstream"
	"github.com/mcpx-dev/mcpx/proxyd/upstream"
)

// naming is who answers to which exposed name right now: the ready
// upstreams in configuration order (what the MCP endpoint serves).
func (d *Daemon) naming() downstream.Naming {
	return downstream.Name(d.Upstreams())
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
// in the form of editdistance.DidYouMean.
func toolHint(c *upstream.Conn, tool string) string {
	var names []string
	for _, t := range c.Tools() {
		names = append(names, t.Name)
	}
	return editdistance.DidYouMean(tool, names)
}
