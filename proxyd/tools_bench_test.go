package proxyd

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// BenchmarkCallManyTools times calls to the last tool of a 10,000-tool
// server against calls to a server with a handful, interleaved call by
// call through one daemon: the size of a server's tool list must not show
// in its calls' latency (each call looks its tool up, twice). It reports
// both p50s and the ratio.
func BenchmarkCallManyTools(b *testing.B) {
	many, err := mcpserver.Start(mcpserver.Options{Era: mcpserver.EraLegacy, ExtraTools: 10_000})
	if err != nil {
		b.Fatal(err)
	}
	defer many.Close()
	few, err := mcpserver.Start(mcpserver.Options{Era: mcpserver.EraLegacy})
	if err != nil {
		b.Fatal(err)
	}
	defer few.Close()
	td := startDaemon(b, "listen: 127.0.0.1:0\nservers:\n  - name: many\n    url: "+many.URL()+
		"\n    protocol: legacy\n  - name: few\n    url: "+few.URL()+"\n    protocol: legacy\n")
	waitReady(b, td, "many")
	waitReady(b, td, "few")
	ctx := context.Background()
	reqs := []api.CallRequest{
		{Server: "few", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)},
		{Server: "many", Tool: "tool_10000", Arguments: json.RawMessage(`{"text":"x"}`)},
	}
	call := func(req api.CallRequest) time.Duration {
		start := time.Now()
		if _, err := td.client.Call(ctx, req); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for range 50 { // warm connections and caches
		for _, r := range reqs {
			call(r)
		}
	}
	samples := make([][]time.Duration, len(reqs))
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for i := range reqs {
			j := (i + n) % len(reqs)
			samples[j] = append(samples[j], call(reqs[j]))
		}
	}
	b.StopTimer()
	p50 := make([]float64, len(reqs))
	for i, s := range samples {
		slices.Sort(s)
		p50[i] = float64(s[len(s)/2])
	}
	b.ReportMetric(p50[0]/1e3, "few_p50_us")
	b.ReportMetric(p50[1]/1e3, "many_p50_us")
	b.ReportMetric(p50[1]/p50[0], "many_x")
}
