package proxyd

import (
	"context"
	"net/http"
	"time"

	"github.com/mcpx-dev/mcpx/probe"
)

// probeOverall bounds a probe run by the daemon when the request sets none.
const probeOverall = 2 * time.Minute

// handleProbe runs a probe inside proxyd, so it shares the daemon's
// discovery cache (and, for a configured server, its stored token).
func (d *Daemon) handleProbe(w http.ResponseWriter, r *http.Request) error {
	var req probe.Request
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Target == "" {
		return badRequest("target is required")
	}
	opts := req.Options()
	opts.Discoverer = d.discoverer
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
