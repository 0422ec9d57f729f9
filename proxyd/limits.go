package proxyd

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/config"
	"github.com/mcpx-dev/mcpx/proxyd/inbound"
)

// servers are proxyd's two HTTP servers with their bounds: the MCP
// endpoint on TCP and the control API on the socket, each with its own
// connection budget, so no load on the endpoint can lock out 'mcpx status'.
type servers struct {
	mcp, api     *http.Server
	mcpLn, apiLn *inbound.Listener
}

func (d *Daemon) newServers(lim config.Limits, mcpLn, sockLn net.Listener, mcpHandler, apiHandler http.Handler) servers {
	nofile := inbound.DescriptorLimit()
	socketCap, endpointCap := inbound.Budget(nofile, lim.Connections())
	if endpointCap < lim.Connections() {
		d.log.Info("limits.max_connections lowered to fit the descriptor limit", "max_connections", endpointCap, "nofile", nofile)
	}
	s := servers{mcpLn: inbound.Limit(mcpLn, endpointCap), apiLn: inbound.Limit(sockLn, socketCap)}
	stalls := prometheus.NewCounter(prometheus.CounterOpts{Name: "mcpx_write_stalls_total",
		Help: "MCP clients disconnected for taking none of what proxyd wrote to them for limits.write_stall_timeout."})
	// Only the endpoint's clients are cut off: the socket's are the user's
	// own commands, which a paused pager may hold up as long as it likes.
	s.mcpLn.BoundWrites(lim.WriteStall(), func(remote net.Addr, after time.Duration) {
		stalls.Inc()
		d.log.Warn("an MCP client stopped taking what proxyd writes to it; its connection was closed",
			"remote", remote.String(), "limits.write_stall_timeout", after.String())
	})
	d.down.SetStreamLimit(max(endpointCap/2, 1))
	body := func(h http.Handler) http.Handler {
		return inbound.Bodies(h, lim.RequestBytes(), lim.BodyTimeout(), requestTooLarge)
	}
	s.mcp = inbound.Server(body(mcpHandler), lim.HeaderTimeout(), lim.KeepAliveTimeout(), s.mcpLn)
	s.api = inbound.Server(body(apiHandler), lim.HeaderTimeout(), lim.KeepAliveTimeout(), s.apiLn)
	gauge := func(name, help string, labels prometheus.Labels, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, f)
	}
	const conns, sessions = "Open connections by listener.", "Live downstream sessions, as proxyd and the MCP library count them."
	d.metrics.reg.MustRegister(stalls,
		gauge("mcpx_open_connections", conns, prometheus.Labels{"listener": "mcp"}, func() float64 { return float64(s.mcpLn.Open()) }),
		gauge("mcpx_open_connections", conns, prometheus.Labels{"listener": "socket"}, func() float64 { return float64(s.apiLn.Open()) }),
		gauge("mcpx_downstream_sessions", sessions, prometheus.Labels{"holder": "proxyd"}, func() float64 { l, _ := d.down.Sessions(); return float64(l) }),
		gauge("mcpx_downstream_sessions", sessions, prometheus.Labels{"holder": "library"}, func() float64 { _, l := d.down.Sessions(); return float64(l) }),
	)
	return s
}

// requestTooLarge answers 413: with a JSON-RPC error on the MCP paths,
// with the control API's error shape elsewhere.
func requestTooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	msg := fmt.Sprintf("request body larger than limits.max_request_bytes (%d bytes); raise it in the config if such requests are expected", limit)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	if r.URL.Path == "/mcp" || strings.HasPrefix(r.URL.Path, "/v1/mcp") {
		_ = json.NewEncoder(w).Encode(mcp.NewJSONRPCError(mcp.NewRequestId(nil), mcp.INVALID_REQUEST, msg, nil))
		return
	}
	_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: api.CodeTooLarge, Message: msg}})
}

// maxRequestTimeout bounds a timeout_ms a request may ask for; more is a
// mistake (or an overflow), not a wish to wait.
const maxRequestTimeout = 24 * time.Hour

// requestTimeout reads a request's timeout_ms: 0 is "the default", a
// negative or overlong one is refused.
func requestTimeout(ms int64) (time.Duration, error) {
	if ms < 0 || ms > maxRequestTimeout.Milliseconds() {
		return 0, badRequest("timeout_ms must be between 0 (the default) and %d (24h), not %d", maxRequestTimeout.Milliseconds(), ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// withCallerTimeout bounds ctx by the timeout a control request asked for
// (none: the server's own, serverTimeout). A deadline shorter than the
// server's is the caller's: its cause says so, and a call it ends is
// classified as the client's timeout, not the server's.
func withCallerTimeout(ctx context.Context, requested, serverTimeout time.Duration) (context.Context, context.CancelFunc) {
	switch {
	case requested <= 0:
		return context.WithTimeout(ctx, serverTimeout)
	case requested < serverTimeout:
		return context.WithTimeoutCause(ctx, requested, &callerr.CallerDeadline{After: requested, ServerTimeout: serverTimeout})
	}
	return context.WithTimeout(ctx, requested)
}
