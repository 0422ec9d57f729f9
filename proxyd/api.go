package proxyd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/downstream"
	"github.com/mcpx-dev/mcpx/proxyd/upstream"
)

// apiError is an error with the HTTP status and code it answers with.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, a ...any) error {
	return &apiError{http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf(format, a...)}
}

func notFound(format string, a ...any) error {
	return &apiError{http.StatusNotFound, api.CodeNotFound, fmt.Sprintf(format, a...)}
}

// handler is a control API endpoint; a returned error becomes the one
// error shape.
type handler func(w http.ResponseWriter, r *http.Request) error

// routes is the control API's one route table.
func (d *Daemon) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, h handler) {
		mux.Handle(pattern, d.serve(h))
	}
	handle("GET /v1/status", d.handleStatus)
	handle("GET /v1/tools", d.handleTools)
	handle("POST /v1/call", d.handleCall)
	handle("POST /v1/reload", d.handleReload)
	handle("POST /v1/shutdown", d.handleShutdown)
	handle("GET /v1/connect-info", d.handleConnectInfo)
	handle("POST /v1/probe", d.handleProbe)
	d.authRoutes(handle)
	d.activityRoutes(handle)
	d.drillRoutes(handle)
	metrics := promhttp.HandlerFor(prometheus.Gatherers{d.metrics.reg, d.tel.Gatherer()}, promhttp.HandlerOpts{})
	handle("GET /v1/metrics", func(w http.ResponseWriter, r *http.Request) error {
		metrics.ServeHTTP(w, r)
		return nil
	})
	// The stdio bridge speaks MCP over the socket: the socket's peer check
	// is its credential, so no bearer here.
	mcp := d.down.Handler("", "stdio")
	mux.Handle("/v1/mcp", d.guardSocket(http.StripPrefix("/v1", mcp)))
	mux.Handle("/", d.serve(func(w http.ResponseWriter, r *http.Request) error {
		return &apiError{http.StatusNotFound, api.CodeNoRoute, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path)}
	}))
	return mux
}

type peerKey struct{}

// connContext notes each socket connection's peer uid.
func (d *Daemon) connContext(ctx context.Context, c net.Conn) context.Context {
	uid, err := peerUID(c)
	if err != nil {
		uid = -1
	}
	return context.WithValue(ctx, peerKey{}, uid)
}

func (d *Daemon) allowedUID() int {
	if d.opts.AllowedUID != nil {
		return *d.opts.AllowedUID
	}
	return os.Getuid()
}

// guardSocket refuses other users' processes and anything a browser sent.
func (d *Daemon) guardSocket(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.VersionHeader, d.opts.Version)
		if uid, _ := r.Context().Value(peerKey{}).(int); uid != d.allowedUID() {
			writeError(w, &apiError{http.StatusForbidden, api.CodeForbidden, "proxyd serves only the user that started it"})
			return
		}
		if r.Header.Get("Origin") != "" || r.Header.Get("Referer") != "" {
			writeError(w, &apiError{http.StatusForbidden, api.CodeForbidden, "requests from browsers are refused"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (d *Daemon) serve(h handler) http.Handler {
	return d.guardSocket(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			writeError(w, err)
		}
	}))
}

func writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{http.StatusInternalServerError, api.CodeInternal, err.Error()}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(ae.status)
	_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: ae.code, Message: ae.msg}})
}

func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(v)
}

func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 16<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("invalid request body: %v", err)
	}
	return nil
}

func (d *Daemon) status() api.Status {
	cfg := d.config()
	s := api.Status{
		Version:       d.opts.Version,
		PID:           os.Getpid(),
		StartedAt:     d.started,
		UptimeSeconds: time.Since(d.started).Seconds(),
		Socket:        d.opts.Socket,
		Listen:        d.listen,
		MCPURL:        "http://" + d.listen + "/mcp",
		ConfigPath:    d.opts.ConfigPath,
		StateDir:      d.opts.StateDir,
		StateDB:       d.db.Engine() + ":" + d.db.Path(),
		Replica:       d.opts.Replica,
		Servers:       []api.ServerStatus{},
	}
	d.cfgMu.RLock()
	if d.cfgErr != nil {
		s.ConfigError = d.cfgErr.Error()
	}
	d.cfgMu.RUnlock()
	_ = cfg
	for _, c := range d.mgr.List() {
		s.Servers = append(s.Servers, d.serverStatus(c))
	}
	return s
}

func (d *Daemon) serverStatus(c *upstream.Conn) api.ServerStatus {
	st := c.Status()
	st.Warnings = d.naming().OmittedBy(c.Name())
	h := d.health.Snapshot(c.Name())
	st.Health = &api.Health{Calls: h.Calls, Failed: h.Failed, DominantClass: h.DominantClass, Degraded: h.Degraded, Summary: h.Summary}
	if st.State == api.StateReady && h.Degraded {
		st.State = api.StateDegraded
		st.Summary = h.Summary
	}
	return st
}

func (d *Daemon) handleStatus(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, d.status())
}

func (d *Daemon) handleTools(w http.ResponseWriter, r *http.Request) error {
	want := r.URL.Query().Get("server")
	out := []api.Tool{}
	found := want == ""
	naming := d.naming()
	for _, c := range d.mgr.List() {
		if want != "" && c.Name() != want {
			continue
		}
		found = true
		cfg := c.Config()
		for _, t := range c.Tools() {
			tool := api.Tool{
				Server: c.Name(), Name: t.Name, Exposed: downstream.ExposedName(c.Name(), cfg.ExposedPrefix(), t.Name),
				Title: t.Title, Description: t.Description, ReadOnly: t.ReadOnly(), Destructive: t.Destructive(),
				InputSchema: t.RawInputSchema,
			}
			if e, held := naming.Tools[tool.Exposed]; held && e != (downstream.Entry{Server: c.Name(), Name: t.Name}) {
				tool.LeftOut = "the name is already exposed by server " + e.Server
			}
			out = append(out, tool)
		}
	}
	if !found {
		return notFound("no server named %q (see 'mcpx servers')", want)
	}
	return writeJSON(w, out)
}

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
	ctx := r.Context()
	if req.TimeoutMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMS)*time.Millisecond)
		defer cancel()
	} else if c, ok := d.mgr.Get(req.Server); ok {
		var cancel context.CancelFunc
		cfg := c.Config()
		ctx, cancel = context.WithTimeout(ctx, cfg.CallTimeout())
		defer cancel()
	}
	out := d.call(d.tel.Extract(ctx, r.Header), req.Server, req.Tool, req.Arguments, downstream.CallMeta{Client: "cli"})
	resp := api.CallResponse{
		RequestID: out.RequestID, Server: req.Server, Tool: req.Tool,
		DurationMS: float64(out.Duration.Microseconds()) / 1000,
	}
	if out.Result != nil {
		resp.Result = out.Result.Raw
		resp.IsError = out.Result.IsError
	}
	if out.Err != nil {
		resp.Error = &api.CallError{
			Message:            redact.Text(out.Err.Error()),
			ErrorClass:         out.Class.Class,
			FaultDomain:        out.Class.Domain,
			UpstreamHTTPStatus: out.Class.HTTPStatus,
			Reason:             out.Class.Reason,
		}
	}
	return writeJSON(w, resp)
}

func (d *Daemon) handleReload(w http.ResponseWriter, r *http.Request) error {
	res, err := d.reload()
	if err != nil {
		return badRequest("config not reloaded, the running configuration stays: %v", err)
	}
	return writeJSON(w, res)
}

func (d *Daemon) handleShutdown(w http.ResponseWriter, r *http.Request) error {
	if err := writeJSON(w, map[string]string{"status": "stopping"}); err != nil {
		return err
	}
	d.requestShutdown()
	return nil
}

func (d *Daemon) handleConnectInfo(w http.ResponseWriter, r *http.Request) error {
	exe, err := os.Executable()
	if err != nil {
		exe = "mcpx"
	}
	return writeJSON(w, api.ConnectInfo{
		URL:          "http://" + d.listen + "/mcp",
		Header:       "Authorization: Bearer " + d.token,
		TokenFile:    d.opts.StateDir + "/" + TokenFile,
		StdioCommand: []string{exe, "--socket", d.opts.Socket, "stdio"},
	})
}
