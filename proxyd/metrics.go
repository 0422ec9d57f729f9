package proxyd

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mcpx-dev/mcpx/internal/procs"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/upstream"
)

// metrics are served on the socket at /v1/metrics in Prometheus text format.
type metrics struct {
	reg     *prometheus.Registry
	calls   *prometheus.CounterVec
	latency *prometheus.HistogramVec
	conns   *connCollector
	streams *streamsCollector
}

// connCollector reports the counters each connection keeps itself:
// its session re-inits as mcpx_session_reinits_total{server} and the
// notifications dropped for its calls' slow clients as
// mcpx_notifications_dropped_total{server}.
type connCollector struct {
	reinits, dropped *prometheus.Desc
	conns            atomic.Pointer[func() []*upstream.Conn]
}

func (r *connCollector) Describe(ch chan<- *prometheus.Desc) { ch <- r.reinits; ch <- r.dropped }

func (r *connCollector) Collect(ch chan<- prometheus.Metric) {
	list := r.conns.Load()
	if list == nil {
		return
	}
	for _, c := range (*list)() {
		ch <- prometheus.MustNewConstMetric(r.reinits, prometheus.CounterValue, float64(c.Status().Reinits), c.Name())
		ch <- prometheus.MustNewConstMetric(r.dropped, prometheus.CounterValue, float64(c.NotificationsDropped()), c.Name())
	}
}

// streamsCollector reports the downstream endpoint's open streams as
// mcpx_downstream_open_streams{kind}: relayed requests being answered and
// subscriptions/listen streams (each ends when its client leaves); and
// the notifications dropped for listen streams' slow clients as
// mcpx_listen_notifications_dropped_total.
type streamsCollector struct {
	desc, dropped *prometheus.Desc
	open          atomic.Pointer[func() (requests, listens int64)]
	listenDropped atomic.Pointer[func() int64]
}

func (s *streamsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc; ch <- s.dropped }

func (s *streamsCollector) Collect(ch chan<- prometheus.Metric) {
	open := s.open.Load()
	if open == nil {
		return
	}
	requests, listens := (*open)()
	ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, float64(requests), "request")
	ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, float64(listens), "listen")
	if dropped := s.listenDropped.Load(); dropped != nil {
		ch <- prometheus.MustNewConstMetric(s.dropped, prometheus.CounterValue, float64((*dropped)()))
	}
}

// trackStreams names where the endpoint's counts are (the endpoint
// exists only after the metrics).
func (m *metrics) trackStreams(open func() (requests, listens int64), listenDropped func() int64) {
	m.streams.open.Store(&open)
	m.streams.listenDropped.Store(&listenDropped)
}

// trackConns names where the connections are (the manager exists only
// after the metrics).
func (m *metrics) trackConns(list func() []*upstream.Conn) { m.conns.conns.Store(&list) }

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
		conns: &connCollector{reinits: prometheus.NewDesc("mcpx_session_reinits_total",
			"Upstream session re-initialisations after a forgotten session, by server.", []string{"server"}, nil),
			dropped: prometheus.NewDesc("mcpx_notifications_dropped_total",
				"A server's notifications dropped for clients of its calls that did not read them (past the bound one call holds), by server.", []string{"server"}, nil)},
		streams: &streamsCollector{desc: prometheus.NewDesc("mcpx_downstream_open_streams",
			"Relayed requests (kind=request) and subscriptions/listen streams (kind=listen) the MCP endpoint is serving now.", []string{"kind"}, nil),
			dropped: prometheus.NewDesc("mcpx_listen_notifications_dropped_total",
				"Notifications dropped for subscriptions/listen clients that did not read them (past the bound one stream holds).", nil, nil)},
	}
	// The processor count itself is the Go collector's
	// go_sched_gomaxprocs_threads; how often it changes is ours.
	changes := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "mcpx_processor_changes_total",
		Help: "Changes of proxyd's processor count (GOMAXPROCS) by its one-processor-while-calls-do-not-overlap policy.",
	}, func() float64 { return float64(procs.Changes()) })
	m.reg.MustRegister(m.calls, m.latency, m.conns, m.streams, changes, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
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
