package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/internal/otlptest"
)

// BenchmarkCallOverhead times a loopback HTTP call wrapped in the call
// funnel's hooks three ways in the same run, interleaved call by call:
// without telemetry (proxyd before it existed), with telemetry off (no
// exporter set: the histograms only) and with traces and metrics exported
// to a real OTLP receiver. It reports each as a ratio to the first.
func BenchmarkCallOverhead(b *testing.B) {
	recv := otlptest.Start(b)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}`)
	}))
	defer srv.Close()
	ctx := context.Background()
	off, err := Setup(ctx, Options{Environ: func(string) string { return "" }})
	if err != nil {
		b.Fatal(err)
	}
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.Endpoint)
	on, err := Setup(ctx, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer on.Shutdown(ctx)
	variants := []*Telemetry{nil, off, on}
	clients := make([]*http.Client, len(variants))
	for i, t := range variants {
		clients[i] = &http.Client{Transport: t.Transport(http.DefaultTransport.(*http.Transport).Clone())}
	}
	call := func(i int) time.Duration {
		t := variants[i]
		start := time.Now()
		cctx, c := t.StartCall(ctx, "fx", "echo", "r1")
		uctx := c.StartUpstream(cctx, srv.URL, "2025-11-25")
		_ = c.PropagationMeta(uctx)
		req, _ := http.NewRequestWithContext(uctx, http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`))
		resp, err := clients[i].Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		c.EndUpstream()
		c.End(Outcome{})
		return time.Since(start)
	}
	for i := range variants { // warm the connections
		call(i)
	}
	samples := make([][]time.Duration, len(variants))
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		// Rotating the order gives each variant every position equally often.
		for i := range variants {
			j := (i + n) % len(variants)
			samples[j] = append(samples[j], call(j))
		}
	}
	b.StopTimer()
	// Medians: the shared machine's stalls hit single calls, not a variant.
	p50 := make([]float64, len(variants))
	for i, s := range samples {
		slices.Sort(s)
		p50[i] = float64(s[len(s)/2])
	}
	b.ReportMetric(p50[0]/1e3, "today_p50_us")
	b.ReportMetric(p50[1]/p50[0], "off_x")
	b.ReportMetric(p50[2]/p50[0], "on_x")
}
