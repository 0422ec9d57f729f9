package proxyd

import (
	"context"
	"net/http"

	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/downstream"
)

func (d *Daemon) handleCall(w http.ResponseWriter, r *http.Request) error {
	var req api.CallRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Tool == "" {
		return badRequest("tool is required")
	}
	if _, isServer := d.mgr.Get(req.Tool); req.Server == "" && isServer {
		if _, exposed := d.naming().Tools[req.Tool]; !exposed {
			return badRequest("%q is a server: name one of its tools too (see 'mcpx tools %s')", req.Tool, req.Tool)
		}
	}
	req.Server, req.Tool = d.resolveTool(req.Server, req.Tool)
	timeout, err := requestTimeout(req.TimeoutMS)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	} else if c, ok := d.mgr.Get(req.Server); ok {
		var cancel context.CancelFunc
		cfg := c.Config()
		ctx, cancel = context.WithTimeout(ctx, cfg.CallTimeout())
		defer cancel()
	}
	if req.Stream {
		return d.streamCall(ctx, w, req)
	}
	out := d.call(ctx, req.Server, req.Tool, req.Arguments, downstream.CallMeta{Client: "cli"})
	return writeJSON(w, callResponse(req, out))
}
