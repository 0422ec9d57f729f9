package proxyd

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/downstream"
	"github.com/mcpx-dev/mcpx/proxyd/drill"
	"github.com/mcpx-dev/mcpx/proxyd/oauth"
	"github.com/mcpx-dev/mcpx/proxyd/upstream"
)

// drillTimeout bounds a whole drill.
const drillTimeout = 5 * time.Minute

// streamDrill runs a drill and streams it as NDJSON, the same way for
// every drill: progress events, then the report, or an error event once
// streaming has begun. Everything sent is redacted.
func streamDrill[R any](w http.ResponseWriter, r *http.Request, run func(ctx context.Context, progress func(string)) (R, error)) {
	out := newNDJSON(w)
	ctx, cancel := context.WithTimeout(r.Context(), drillTimeout)
	defer cancel()
	rep, err := run(ctx, func(msg string) {
		_ = out.send(api.DrillEvent[R]{Type: api.DrillEventProgress, Time: time.Now().UTC(), Message: redact.Text(msg)})
	})
	if err != nil {
		_ = out.send(api.DrillEvent[R]{Type: api.DrillEventError, Time: time.Now().UTC(),
			Error: &api.ErrorDetail{Code: api.CodeUnavailable, Message: redact.Text(err.Error())}})
		return
	}
	_ = out.send(api.DrillEvent[R]{Type: api.DrillEventReport, Time: time.Now().UTC(), Report: &rep})
}

// handleDrillSession ends a server's upstream session and fires calls at
// it (drill.Session).
func (d *Daemon) handleDrillSession(w http.ResponseWriter, r *http.Request) error {
	var req api.SessionDrillRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Server == "" {
		return badRequest("server is required")
	}
	if req.Calls == 0 {
		req.Calls = 20
	}
	if req.Calls < 1 || req.Calls > drill.MaxCalls {
		return badRequest("calls must be between 1 and %d", drill.MaxCalls)
	}
	conn, ok := d.mgr.Get(req.Server)
	if !ok {
		return d.noServer(req.Server)
	}
	cfg := conn.Config()
	if cfg.Disabled {
		return unavailable("server %q is disabled in the config: the drill cannot run", req.Server)
	}
	if st := conn.State(); st != api.StateReady && st != api.StateDegraded {
		why := ""
		if e := conn.Status().LastError; e != "" {
			why = ": " + e
		}
		return unavailable("server %q is %s%s; the drill cannot run (see 'mcpx status %s')", req.Server, st.Phrase(), why, req.Server)
	}
	call := func(ctx context.Context, tool string, args json.RawMessage) drill.Outcome {
		ctx, cancel := context.WithTimeout(ctx, cfg.CallTimeout())
		defer cancel()
		out := d.call(ctx, req.Server, tool, args, downstream.CallMeta{Client: "drill"})
		o := drill.Outcome{Err: out.Err, ErrorClass: out.Class.Class}
		if out.Err != nil {
			o.Err = redactedError{msg: redact.Text(out.Err.Error()), err: out.Err}
		}
		if out.Result != nil {
			o.IsError = out.Result.IsError
		}
		return o
	}
	d.log.Info("session drill started", "server", req.Server, "calls", req.Calls, "include_writes", req.IncludeWrites)
	streamDrill(w, r, func(ctx context.Context, progress func(string)) (api.SessionDrillReport, error) {
		rep, err := drill.Session(ctx, conn, call, drill.SessionOptions{Calls: req.Calls, IncludeWrites: req.IncludeWrites, Progress: progress})
		for i := range rep.Notes {
			rep.Notes[i] = redact.Text(rep.Notes[i])
		}
		if err == nil {
			d.log.Info("session drill finished", "server", req.Server, "verdict", rep.Verdict, "reinits", rep.Reinits,
				"retried", rep.Retried, "not_repeated", rep.NotRepeated, "failed", rep.Failed)
		}
		return rep, err
	})
	return nil
}

// redactedError keeps the error chain (for errors.Is) behind a message
// with credentials removed.
type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

// handleDrillRefresh races concurrent callers for an expired token
// (drill.Refresh) against a signed-in server.
func (d *Daemon) handleDrillRefresh(w http.ResponseWriter, r *http.Request) error {
	var req api.RefreshDrillRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Callers == 0 {
		req.Callers = 50
	}
	if req.Callers < 1 || req.Callers > drill.MaxCallers {
		return badRequest("callers must be between 1 and %d", drill.MaxCallers)
	}
	s, err := d.httpServer(req.Server)
	if err != nil {
		return err
	}
	conn, ok := d.mgr.Get(s.Name)
	if !ok {
		return d.noServer(s.Name)
	}
	t := &refreshTarget{coord: d.auth.coord, key: serverKey(s), conn: conn}
	tok, err := d.auth.store.Token(r.Context(), t.key)
	if err != nil {
		if conn.NotReady() == nil {
			// Connected without a sign-in: there is no grant to drill, and
			// 'mcpx login' would say there is nothing to sign in to.
			if s.SetsAuthorization() {
				return unavailable("%s is connected with the Authorization header its config sets (a static token), so there is no token to refresh: the drill cannot run (it is for servers signed in with 'mcpx login')", s.Name)
			}
			return unavailable("%s is connected with no sign-in stored (no OAuth grant), so there is no token to refresh: the drill cannot run (it is for servers signed in with 'mcpx login')", s.Name)
		}
		var nr *upstream.ErrNotReady
		if errors.As(conn.NotReady(), &nr) && !nr.SignIn && nr.State == api.StateError {
			// Failing for another reason than a sign-in (TLS, say): a
			// login would fail on it too.
			return unavailable("%s is in error, not for want of a sign-in: %s; the drill cannot run (see 'mcpx status %s')", s.Name, nr.LastError, s.Name)
		}
		return authRequired("not signed in to %s: run 'mcpx login %s' first", s.Name, s.Name)
	}
	if tok.RefreshToken == "" && d.machineGrant(s) == nil {
		if tok.Static() {
			return unavailable("%s holds a static token (set with 'mcpx auth set-token'), which has nothing to refresh: the drill cannot run (it is for servers signed in with 'mcpx login')", s.Name)
		}
		return unavailable("the grant for %s has no refresh token: nothing to drill, the drill cannot run (the server did not issue one; see 'mcpx auth status %s')", s.Name, s.Name)
	}
	streamDrill(w, r, func(ctx context.Context, progress func(string)) (api.RefreshDrillReport, error) {
		return drill.Refresh(ctx, t, drill.RefreshOptions{Callers: req.Callers, At: req.At, Join: req.Join, Replica: d.opts.Replica, Progress: progress})
	})
	return nil
}

// refreshTarget is a server's grant in the coordinator and its upstream
// connection, for drill.Refresh.
type refreshTarget struct {
	coord *oauth.Coordinator
	key   string
	conn  *upstream.Conn
}

func (t *refreshTarget) Name() string { return t.conn.Name() }
func (t *refreshTarget) ExpireAccessToken(ctx context.Context) error {
	return t.coord.ExpireAccessToken(ctx, t.key)
}
func (t *refreshTarget) TokenRequests() int64 { return t.coord.TokenRequests(t.key) }
func (t *refreshTarget) RefreshProactively(ctx context.Context) error {
	_, err := t.coord.Refresh(ctx, t.key, oauth.TriggerProactive, nil)
	return err
}
func (t *refreshTarget) Forget() { t.coord.Forget(t.key) }
func (t *refreshTarget) Call(ctx context.Context) error {
	_, err := t.conn.ListTools(ctx)
	return err
}
