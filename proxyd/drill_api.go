package proxyd

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/downstream"
	"github.com/mcpx-dev/mcpx/proxyd/drill"
)

// drillTimeout bounds a whole drill.
const drillTimeout = 5 * time.Minute

func (d *Daemon) drillRoutes(handle func(string, handler)) {
	// The re-init counter lives on each connection; metrics read it there.
	d.metrics.trackReinits(d.mgr.List)
	handle("POST /v1/drill/session", d.handleDrillSession)
}

// handleDrillSession runs the session drill and streams NDJSON: progress
// events, then the report (or an error event once streaming has begun).
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
		return notFound("unknown server %q (see 'mcpx servers')", req.Server)
	}
	cfg := conn.Config()
	if cfg.Disabled {
		return badRequest("server %q is disabled in the config", req.Server)
	}

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	var mu sync.Mutex
	emit := func(ev api.SessionDrillEvent) {
		ev.Time = time.Now().UTC()
		b, err := json.Marshal(ev)
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		_, _ = w.Write(append(b, '\n'))
		if flusher != nil {
			flusher.Flush()
		}
	}

	ctx, cancel := context.WithTimeout(r.Context(), drillTimeout)
	defer cancel()
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
	rep, err := drill.Session(ctx, conn, call, drill.SessionOptions{
		Calls:         req.Calls,
		IncludeWrites: req.IncludeWrites,
		Progress: func(msg string) {
			emit(api.SessionDrillEvent{Type: api.DrillEventProgress, Message: redact.Text(msg)})
		},
	})
	if err != nil {
		emit(api.SessionDrillEvent{Type: api.DrillEventError, Error: &api.ErrorDetail{Code: api.CodeBadRequest, Message: redact.Text(err.Error())}})
		return nil
	}
	for i := range rep.Notes {
		rep.Notes[i] = redact.Text(rep.Notes[i])
	}
	d.log.Info("session drill finished", "server", req.Server, "verdict", rep.Verdict, "reinits", rep.Reinits,
		"retried", rep.Retried, "not_repeated", rep.NotRepeated, "failed", rep.Failed)
	emit(api.SessionDrillEvent{Type: api.DrillEventReport, Report: &rep})
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
