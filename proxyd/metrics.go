package proxyd

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/upstream"
)

// metrics are served on the socket at /v1/metrics in Prometheus text format.
type metrics struct {
	reg     *prometheus.Registry
	calls   *prometheus.CounterVec
	latency *prometheus.HistogramVec
	reinits *reinitCollector
}

// reinitCollector reports each connection's session re-init counter
// (kept by the connection itself) as mcpx_session_reinits_total{server}.
type reinitCollector struct {
	desc  *prometheus.Desc
	conns atomic.Pointer[func() []*upstream.Conn]
}

func (r *reinitCollector) Describe(ch chan<- *prometheus.Desc) { ch <- r.desc }

func (r *reinitCollector) Collect(ch chan<- prometheus.Metric) {
	list := r.conns.Load()
	if list == nil {
		return
	}
	for _, c := range (*list)() {
		ch <- prometheus.MustNewConstMetric(r.desc, prometheus.CounterValue, float64(c.Status().Reinits), c.Name())
	}
}

// trackReinits names where the connections are (the manager exists only
// after the metrics).
func (m *metrics) trackReinits(list func() []*upstream.Conn) { m.reinits.conns.Store(&list) }

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpx_tool_calls_total",
			Help: "Tool calls through proxyd by server, outcome, error class and fault domain.",
		}, []string{"server", "status", "error_class", "fault_domain"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpx_tool_call_duration_seconds",
			Help:    "Latency of tool calls through proxyd by server.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"server"}),
		reinits: &reinitCollector{desc: prometheus.NewDesc("mcpx_session_reinits_total",
			"Upstream session re-initialisations after a forgotten session, by server.", []string{"server"}, nil)},
	}
	m.reg.MustRegister(m.calls, m.latency, m.reinits, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) observeCall(server string, c callerr.Classification, d time.Duration) {
	status := "ok"
	if c.Class != "" {
		status = "error"
	}
	m.calls.WithLabelValues(server, status, c.Class, c.Domain).Inc()
	m.latency.WithLabelValues(server).Observe(d.Seconds())
}
