package telemetry

import (
	"strings"
	"testing"
)

func TestSignalOn(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		on   bool
		err  string
	}{
		{"nothing set", nil, false, ""},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true, ""},
		{"signal endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true, ""},
		{"exporter otlp, default endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, ""},
		{"exporter none wins", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, false, ""},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, false, ""},
		{"unsupported exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, "not supported"},
		{"grpc refused", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, "http/protobuf"},
		{"http/protobuf", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := func(k string) string { return tt.env[k] }
			on, err := signalOn(env, "TRACES", strings.EqualFold(env("OTEL_SDK_DISABLED"), "true"))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || on != tt.on {
				t.Fatalf("on %v err %v, want %v", on, err, tt.on)
			}
		})
	}
}

// Without an exporter the wrappers are the wrapped values themselves.
func TestOffInstallsNothing(t *testing.T) {
	tel, err := Setup(t.Context(), Options{Environ: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	if tel.Tracing() {
		t.Fatal("tracing on without an exporter")
	}
	var nilTel *Telemetry
	for _, tt := range []*Telemetry{tel, nilTel} {
		if tt.Transport(nil) != nil || tt.Handler(nil) != nil {
			t.Error("a wrapper was installed with tracing off")
		}
	}
}
