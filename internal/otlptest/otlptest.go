// Package otlptest runs the OpenTelemetry Collector's own OTLP receiver
// (HTTP) on loopback inside a test and keeps what it receives, so tests
// check exported telemetry as a real collector decodes it.
package otlptest

import (
	"context"
	"net"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

// Receiver is a running OTLP/HTTP receiver.
type Receiver struct {
	// Endpoint is its base URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
	Endpoint string
	traces   *consumertest.TracesSink
	metrics  *consumertest.MetricsSink
}

// Start runs a receiver until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the receiver binds it again itself

	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.GRPC = configoptional.None[configgrpc.ServerConfig]()
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = addr
	r := &Receiver{Endpoint: "http://" + addr, traces: new(consumertest.TracesSink), metrics: new(consumertest.MetricsSink)}
	set := receivertest.NewNopSettings(f.Type())
	ctx := context.Background()
	tr, err := f.CreateTraces(ctx, set, cfg, r.traces)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := f.CreateMetrics(ctx, set, cfg, r.metrics)
	if err != nil {
		t.Fatal(err)
	}
	// Both signals share one receiver instance: starting one starts it.
	if err := tr.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	if err := mr.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tr.Shutdown(context.Background())
		_ = mr.Shutdown(context.Background())
	})
	return r
}

// Span is one received span, flattened.
type Span struct {
	Name, TraceID, SpanID, ParentID, Kind, Status, StatusMessage string
	Attrs                                                        map[string]any
	Events                                                       []string
	Resource                                                     map[string]any
}

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	var out []Span
	for _, td := range r.traces.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			res := rs.Resource().Attributes().AsRaw()
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					sp := Span{Name: s.Name(), TraceID: s.TraceID().String(), SpanID: s.SpanID().String(),
						ParentID: s.ParentSpanID().String(), Kind: s.Kind().String(), Status: s.Status().Code().String(),
						StatusMessage: s.Status().Message(), Attrs: s.Attributes().AsRaw(), Resource: res}
					if s.ParentSpanID().IsEmpty() {
						sp.ParentID = ""
					}
					for _, e := range s.Events().All() {
						sp.Events = append(sp.Events, e.Name())
					}
					out = append(out, sp)
				}
			}
		}
	}
	return out
}

// MetricNames returns the names of every metric received so far.
func (r *Receiver) MetricNames() map[string]bool {
	out := map[string]bool{}
	for _, md := range r.metrics.AllMetrics() {
		for _, rm := range md.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					out[m.Name()] = true
				}
			}
		}
	}
	return out
}

// Histogram returns the data points of the histogram name received so
// far, each as its attributes and count.
func (r *Receiver) Histogram(name string) []HistogramPoint {
	var out []HistogramPoint
	for _, md := range r.metrics.AllMetrics() {
		for _, rm := range md.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					if m.Name() != name || m.Type() != pmetric.MetricTypeHistogram {
						continue
					}
					for _, dp := range m.Histogram().DataPoints().All() {
						out = append(out, HistogramPoint{Attrs: dp.Attributes().AsRaw(), Count: dp.Count()})
					}
				}
			}
		}
	}
	return out
}

// HistogramPoint is one histogram data point.
type HistogramPoint struct {
	Attrs map[string]any
	Count uint64
}
