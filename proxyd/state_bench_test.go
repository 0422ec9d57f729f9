package proxyd

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/pgtest"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// BenchmarkCallLatencyByState times tool calls through two daemons in the
// same run, one on SQLite state and one on PostgreSQL state, interleaved
// call by call against one fixture: the activity write is batched off the
// call path, so the state engine must not show in call latency. It reports
// each daemon's p50 and the ratio.
func BenchmarkCallLatencyByState(b *testing.B) {
	fx, err := mcpserver.Start(mcpserver.Options{Era: mcpserver.EraModern})
	if err != nil {
		b.Fatal(err)
	}
	defer fx.Close()
	body := "listen: 127.0.0.1:0\nservers:\n  - name: fx\n    url: " + fx.URL() + "\n"
	b.Setenv("MCPX_BENCH_DSN", pgtest.Database(b))
	tds := []*testDaemon{
		startDaemon(b, body),
		startDaemon(b, "state: {postgres: \"${env:MCPX_BENCH_DSN}\"}\n"+body),
	}
	ctx := context.Background()
	req := api.CallRequest{Server: "fx", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)}
	var calls []func() error
	for _, td := range tds {
		waitReady(b, td, "fx")
		calls = append(calls, func() error { _, err := td.client.Call(ctx, req); return err })
	}
	p50 := interleavedP50s(b, calls...)
	b.ReportMetric(p50[0], "sqlite_p50_us")
	b.ReportMetric(p50[1], "postgres_p50_us")
	b.ReportMetric(p50[1]/p50[0], "postgres_x")
}

// interleavedP50s times b.N runs of each call after 50 warm-up rounds
// (connections, caches), interleaved call by call with the order rotated
// each round, so that what the machine does meanwhile falls on all of
// them alike; it returns each call's p50 in microseconds.
func interleavedP50s(b *testing.B, calls ...func() error) []float64 {
	b.Helper()
	run := func(call func() error) time.Duration {
		start := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for range 50 {
		for _, call := range calls {
			run(call)
		}
	}
	samples := make([][]time.Duration, len(calls))
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for i := range calls {
			j := (i + n) % len(calls)
			samples[j] = append(samples[j], run(calls[j]))
		}
	}
	b.StopTimer()
	p50 := make([]float64, len(calls))
	for i, s := range samples {
		slices.Sort(s)
		p50[i] = float64(s[len(s)/2]) / 1e3
	}
	return p50
}
