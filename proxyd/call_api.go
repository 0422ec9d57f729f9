package proxyd

import (
	"net/http"
	"strings"

	"github.com/mcpx-dev/mcpx/internal/editdistance"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
	"github.com/mcpx-dev/mcpx/proxyd/downstream"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

func (d *Daemon) handleCall(w http.ResponseWriter, r *http.Request) error {
	var req api.CallRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Tool == "" {
		return badRequest("tool is required")
	}
	if req.LogLevel != "" && relay.LogLevelRank(req.LogLevel) < 0 {
		return badRequest("log_level %q is not one of %s", req.LogLevel, strings.Join(relay.LogLevels, ", "))
	}
	if _, isServer := d.mgr.Get(req.Tool); req.Server == "" && isServer {
		if _, exposed := d.naming().Tools[req.Tool]; !exposed {
			return badRequest("%q is a server: name one of its tools too (see 'mcpx tools %s')", req.Tool, req.Tool)
		}
	}
	typed := req.Tool // as the user wrote it, for the did-you-mean hint
	req.Server, req.Tool = d.resolveTool(req.Server, req.Tool)
	timeout, err := requestTimeout(req.TimeoutMS)
	if err != nil {
		return err
	}
	serverTimeout := config.DefaultCallTimeout
	if c, ok := d.mgr.Get(req.Server); ok {
		cfg := c.Config()
		serverTimeout = cfg.CallTimeout()
	}
	ctx, cancel := withCallerTimeout(r.Context(), timeout, serverTimeout)
	defer cancel()
	if req.CheckSchema {
		ctx = withSchemaCheck(ctx)
	}
	if req.Stream {
		return d.streamCall(ctx, w, req, typed)
	}
	out := d.call(d.tel.Extract(ctx, r.Header), req.Server, req.Tool, req.Arguments, downstream.CallMeta{Client: "cli"})
	return writeJSON(w, d.explainMissing(req, typed, callResponse(req, out)))
}

// explainMissing marks a failed call whose server or tool does not exist
// (error.not_found) and adds the nearest name to its message, in the
// form of typed, the tool's name as the user wrote it: an exposed name
// (prefix and all) or the server's own.
func (d *Daemon) explainMissing(req api.CallRequest, typed string, resp api.CallResponse) api.CallResponse {
	if resp.Error != nil {
		d.markMissing(resp.Error, req.Server, req.Tool, typed)
	}
	return resp
}

// markMissing sets a call error's not_found and did-you-mean when its
// server or tool does not exist (see callTarget).
func (d *Daemon) markMissing(e *api.CallError, srv, tool, typed string) {
	if missing, hint := d.callTarget(srv, tool, typed); missing != "" {
		e.NotFound = missing
		e.Message = withHint(e.Message, hint)
	}
}

// callTarget says what of a call's target does not exist ("server",
// "tool" or "") and the did-you-mean hint for it, in typed's form. A
// tool is only known missing once its server is ready and has listed its
// tools.
func (d *Daemon) callTarget(srv, tool, typed string) (missing, hint string) {
	if srv == "" {
		var names []string
		for name := range d.naming().Tools {
			names = append(names, name)
		}
		return "tool", editdistance.DidYouMean(tool, names)
	}
	c, ok := d.mgr.Get(srv)
	if !ok {
		return "server", editdistance.DidYouMean(srv, d.serverNames())
	}
	if _, known := c.Tool(tool); !known && c.State() == api.StateReady {
		cfg := c.Config()
		if p := cfg.ExposedPrefix(); p != "" && typed != tool && strings.HasPrefix(typed, p) {
			return "tool", toolHint(c, typed, p) // typed as exposed
		}
		return "tool", toolHint(c, tool, "")
	}
	return "", ""
}

// withHint puts a did-you-mean next to the name it is about: before the
// message's pointer to a command (" (see 'mcpx tools docs')"), if any.
func withHint(msg, hint string) string {
	if i := strings.LastIndex(msg, " (see '"); i >= 0 && hint != "" {
		return msg[:i] + hint + msg[i:]
	}
	return msg + hint
}
