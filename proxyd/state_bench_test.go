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
	call := func(td *testDaemon) time.Duration {
		start := time.Now()
		if _, err := td.client.Call(ctx, req); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for _, td := range tds {
		waitReady(b, td, "fx")
		for range 50 { // warm connections and caches
			call(td)
		}
	}
	samples := make([][]time.Duration, len(tds))
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for i := range tds {
			j := (i + n) % len(tds)
			samples[j] = append(samples[j], call(tds[j]))
		}
	}
	b.StopTimer()
	p50 := make([]float64, len(tds))
	for i, s := range samples {
		slices.Sort(s)
		p50[i] = float64(s[len(s)/2])
	}
	b.ReportMetric(p50[0]/1e3, "sqlite_p50_us")
	b.ReportMetric(p50[1]/1e3, "postgres_p50_us")
	b.ReportMetric(p50[1]/p50[0], "postgres_x")
}
