package proxyd

import (
	"strings"

	"github.com/mcpx-dev/mcpx/proxyd/downstream"
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
