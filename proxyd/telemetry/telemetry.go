// Package telemetry exports proxyd's traces and metrics with OpenTelemetry,
// named by the OpenTelemetry semantic conventions for MCP.
//
// Configuration is the standard OTEL_* environment: traces and metrics go
// over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT (or the per-signal
// endpoint) is set, or OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER say
// otlp; "none" or OTEL_SDK_DISABLED=true turns a signal off. Without an
// exporter, tracing is off and its hooks are not installed at all: the
// call path is what it was. The operation-duration histograms are always
// kept and served with proxyd's other metrics in Prometheus format.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	prombridge "go.opentelemetry.io/contrib/bridges/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/prometheus/client_golang/prometheus"
)

// ScopeName is the instrumentation scope of everything proxyd emits.
const ScopeName = "github.com/mcpx-dev/mcpx/proxyd"

// Options describe the process being instrumented.
type Options struct {
	ServiceVersion string
	// Replica becomes service.instance.id.
	Replica string
	// Gatherer holds proxyd's Prometheus metrics, bridged to OTLP when
	// metrics are exported.
	Gatherer prometheus.Gatherer
	// Environ reads the environment for the choice of signals (os.Getenv
	// when nil); the exporters read the process environment themselves.
	Environ func(string) string
}

// Telemetry is proxyd's instrumentation. A nil *Telemetry is valid and
// does nothing.
type Telemetry struct {
	tracer     trace.Tracer // nil: tracing off
	prop       propagation.TextMapPropagator
	reg        *prometheus.Registry // the duration histograms, for /metrics
	serverDur  metric.Float64Histogram
	clientDur  metric.Float64Histogram
	shutdowns  []func(context.Context) error
	sets       sync.Map // setKey -> *setPair
	nsets      atomic.Int64
	traceDest  string
	metricDest string
}

// durationBuckets are the semantic conventions' advice for MCP operation
// durations, in seconds.
var durationBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// Setup reads the OTEL_* environment and starts what it asks for.
func Setup(ctx context.Context, opts Options) (*Telemetry, error) {
	env := opts.Environ
	if env == nil {
		env = os.Getenv
	}
	t := &Telemetry{prop: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		reg: prometheus.NewRegistry()}
	disabled := strings.EqualFold(env("OTEL_SDK_DISABLED"), "true")
	tracesOn, err := signalOn(env, "TRACES", disabled)
	if err != nil {
		return nil, err
	}
	metricsOn, err := signalOn(env, "METRICS", disabled)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.version", opts.ServiceVersion),
			attribute.String("service.instance.id", opts.Replica)))
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	if env("OTEL_SERVICE_NAME") == "" && !strings.Contains(env("OTEL_RESOURCE_ATTRIBUTES"), "service.name=") {
		res, _ = resource.Merge(res, resource.NewSchemaless(attribute.String("service.name", "mcpx-proxyd")))
	}

	if tracesOn {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP trace exporter: %w", err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		t.tracer = tp.Tracer(ScopeName)
		t.shutdowns = append(t.shutdowns, tp.Shutdown)
		t.traceDest = endpointOf(env, "TRACES")
	}

	// The histograms are always kept for Prometheus; OTLP adds a periodic
	// reader that also carries proxyd's Prometheus metrics.
	promExp, err := otelprom.New(otelprom.WithRegisterer(t.reg), otelprom.WithoutTargetInfo(), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(promExp),
		sdkmetric.WithView(sdkmetric.NewView(sdkmetric.Instrument{Name: "mcp.*.operation.duration"},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: durationBuckets}}))}
	if metricsOn {
		exp, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP metric exporter: %w", err)
		}
		var ropts []sdkmetric.PeriodicReaderOption
		if opts.Gatherer != nil {
			ropts = append(ropts, sdkmetric.WithProducer(prombridge.NewMetricProducer(prombridge.WithGatherer(opts.Gatherer))))
		}
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, ropts...)))
		t.metricDest = endpointOf(env, "METRICS")
	}
	mp := sdkmetric.NewMeterProvider(mopts...)
	t.shutdowns = append(t.shutdowns, mp.Shutdown)
	meter := mp.Meter(ScopeName)
	if t.serverDur, err = meter.Float64Histogram("mcp.server.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("MCP request duration as observed on the receiver from the time it was received until the result is sent.")); err != nil {
		return nil, err
	}
	if t.clientDur, err = meter.Float64Histogram("mcp.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("MCP request duration as observed on the sender from the time it was sent until the response is received.")); err != nil {
		return nil, err
	}
	return t, nil
}

// signalOn decides whether a signal (TRACES or METRICS) is exported.
func signalOn(env func(string) string, signal string, disabled bool) (bool, error) {
	if disabled {
		return false, nil
	}
	switch v := strings.ToLower(strings.TrimSpace(env("OTEL_" + signal + "_EXPORTER"))); v {
	case "none":
		return false, nil
	case "otlp", "":
		if v == "" && env("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && env("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") == "" {
			return false, nil
		}
	default:
		return false, fmt.Errorf("OTEL_%s_EXPORTER=%s is not supported: use otlp or none", signal, v)
	}
	proto := env("OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL")
	if proto == "" {
		proto = env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return false, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%s is not supported: proxyd exports OTLP over http/protobuf (port 4318)", proto)
	}
	return true, nil
}

func endpointOf(env func(string) string, signal string) string {
	if v := env("OTEL_EXPORTER_OTLP_" + signal + "_ENDPOINT"); v != "" {
		return v
	}
	if v := env("OTEL_EXPORTER_OTLP_ENDPOINT"); v != "" {
		return v
	}
	return "http://localhost:4318 (default)"
}

// Tracing reports whether spans are exported.
func (t *Telemetry) Tracing() bool { return t != nil && t.tracer != nil }

// Describe says where telemetry goes, for the start-up log.
func (t *Telemetry) Describe() (traces, metrics string) {
	traces, metrics = "off", "prometheus"
	if t == nil {
		return
	}
	if t.traceDest != "" {
		traces = "otlp " + t.traceDest
	}
	if t.metricDest != "" {
		metrics += ", otlp " + t.metricDest
	}
	return
}

// Gatherer is the registry of the operation-duration histograms, to serve
// beside proxyd's other Prometheus metrics.
func (t *Telemetry) Gatherer() prometheus.Gatherer {
	if t == nil {
		return prometheus.Gatherers{}
	}
	return t.reg
}

// Shutdown flushes and stops the exporters.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	for _, f := range t.shutdowns {
		if err := f(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// now is the clock of durations.
var now = time.Now
