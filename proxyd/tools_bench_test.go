package proxyd

import (
	"context"
	"encoding/json"
	"testing"

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
	call := func(req api.CallRequest) func() error {
		return func() error { _, err := td.client.Call(ctx, req); return err }
	}
	p50 := interleavedP50s(b,
		call(api.CallRequest{Server: "few", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)}),
		call(api.CallRequest{Server: "many", Tool: "tool_10000", Arguments: json.RawMessage(`{"text":"x"}`)}))
	b.ReportMetric(p50[0], "few_p50_us")
	b.ReportMetric(p50[1], "many_p50_us")
	b.ReportMetric(p50[1]/p50[0], "many_x")
}
