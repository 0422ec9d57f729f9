package proxyd

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/inbound"
)

// serverStates are every state a server can report, so each
// mcpx_server_state series exists (0 or 1) from the start.
var serverStates = []api.State{api.StateConnecting, api.StateReady, api.StateDegraded, api.StateError, api.StateDisabled}

// serverCollector reports each server's state: mcpx_server_up{server} is
// 1 while it serves tools (ready or degraded), mcpx_server_state{server,
// state} is 1 for its current state.
type serverCollector struct {
	up, state *prometheus.Desc
	d         *Daemon
}

func newServerCollector(d *Daemon) *serverCollector {
	return &serverCollector{
		up:    prometheus.NewDesc("mcpx_server_up", "1 while the upstream server serves tools (ready or degraded), else 0.", []string{"server"}, nil),
		state: prometheus.NewDesc("mcpx_server_state", "1 for the upstream server's current state, 0 for the others.", []string{"server", "state"}, nil),
		d:     d,
	}
}

func (c *serverCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.up; ch <- c.state }

func (c *serverCollector) Collect(ch chan<- prometheus.Metric) {
	if c.d.mgr == nil {
		return
	}
	for _, conn := range c.d.mgr.List() {
		st := c.d.serverStatus(conn).State
		up := 0.0
		if st == api.StateReady || st == api.StateDegraded {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, conn.Name())
		for _, s := range serverStates {
			v := 0.0
			if s == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, conn.Name(), string(s))
		}
	}
}

// metricsHandler serves proxyd's Prometheus metrics: the socket's
// /v1/metrics and the TCP listener's /metrics.
func (d *Daemon) metricsHandler() http.Handler {
	h := promhttp.HandlerFor(prometheus.Gatherers{d.metrics.reg, d.tel.Gatherer()}, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.answered.wait(r.Context()) // count the calls answered so far
		h.ServeHTTP(w, r)
	})
}

// probeRoutes are the metrics listener's endpoints: /metrics, /livez
// (the daemon answers) and /readyz (it can take calls: not shutting down,
// state database reachable).
func (d *Daemon) probeRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", d.metricsHandler())
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := d.ready(r.Context()); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
	return mux
}

// ready reports why the daemon should not get new calls, or nil.
func (d *Daemon) ready(ctx context.Context) error {
	select {
	case <-d.shutdown:
		return fmt.Errorf("shutting down")
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var one int
	if err := d.db.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("state database unreachable")
	}
	return nil
}

// metricsConnections caps the metrics listener's open connections.
const metricsConnections = 32

// serveMetrics starts the metrics listener when the config asks for one;
// the returned server is shut down with the daemon.
func (d *Daemon) serveMetrics(addr string) (*http.Server, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics_listen %s: %w (is another process using it?)", addr, err)
	}
	// Bounded like the other servers: scrapers and probes are few.
	lim := d.config().Limits
	capped := inbound.Limit(ln, metricsConnections)
	srv := inbound.Server(inbound.Bodies(d.probeRoutes(), lim.RequestBytes(), lim.BodyTimeout(), requestTooLarge),
		lim.HeaderTimeout(), lim.KeepAliveTimeout(), capped)
	go func() { _ = srv.Serve(capped) }()
	d.metricsAddr = ln.Addr().String()
	return srv, nil
}
