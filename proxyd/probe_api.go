package proxyd

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/mcpx-dev/mcpx/probe"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// probeOverall bounds a probe run by the daemon when the request sets none.
const probeOverall = 2 * time.Minute

// handleProbe runs a probe inside proxyd. A named server is resolved from
// the daemon's own configuration (its URL, headers, TLS settings and
// OAuth overrides) and probed with the token stored for it.
func (d *Daemon) handleProbe(w http.ResponseWriter, r *http.Request) error {
	var req api.ProbeRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	opts, err := probe.NewOptions(req, d.config().Server)
	var unknown *probe.UnknownServerError
	if errors.As(err, &unknown) {
		return d.noServer(unknown.Name)
	}
	if err != nil {
		return badRequest("%v", err)
	}
	if req.Server != "" {
		opts.BearerToken = d.storedToken(r.Context(), req.Server)
	}
	ctx := r.Context()
	if opts.Overall == 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, probeOverall)
		defer cancel()
	}
	rep := probe.Run(ctx, opts)
	rep.Mode = probe.ModeProxyd
	return writeJSON(w, rep)
}

// storedToken is the access token proxyd holds for a server, or "".
func (d *Daemon) storedToken(ctx context.Context, server string) string {
	s, ok := d.config().Server(server)
	if !ok || s.URL == "" {
		return ""
	}
	tok, err := d.auth.coord.Token(ctx, serverKey(*s))
	if err != nil {
		return ""
	}
	return tok.AccessToken
}
