package activity

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/store"
)

// BenchmarkRecordingOverhead measures, in one run, a tools/call over
// Streamable HTTP to a loopback upstream as is, and with everything proxyd
// adds to record it: the transport recorder, classification and an
// activity record. It reports the p50 of each and the difference.
func BenchmarkRecordingOverhead(b *testing.B) {
	s := server.NewMCPServer("bench", "1.0.0")
	s.AddTool(mcp.NewTool("echo"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	srv := httptest.NewServer(server.NewStreamableHTTPServer(s))
	defer srv.Close()

	mk := func() *client.Client {
		hc := &http.Client{Transport: callerr.NewTransport(http.DefaultTransport.(*http.Transport).Clone())}
		tr, err := transport.NewStreamableHTTP(srv.URL, transport.WithHTTPBasicClient(hc))
		if err != nil {
			b.Fatal(err)
		}
		c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
		if err := c.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		init := mcp.InitializeRequest{}
		init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
		init.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "1"}
		if _, err := c.Initialize(context.Background(), init); err != nil {
			b.Fatal(err)
		}
		return c
	}
	c := mk()
	defer c.Close()
	// batch: the record is queued; sync: the call waits for its commit.
	for _, durability := range []string{DurabilityBatch, DurabilitySync} {
		b.Run(durability, func(b *testing.B) { recordingOverhead(b, c, durability) })
	}
}

func recordingOverhead(b *testing.B, c *client.Client, durability string) {
	st := NewStore(openDB(b, store.EngineSQLite), Options{MaxAge: -1, MaxRows: -1, Durability: durability})
	defer st.Close()

	req := mcp.CallToolRequest{}
	req.Params.Name = "echo"
	plain := func() {
		if _, err := c.CallTool(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
	recorded := func() {
		start := time.Now()
		ctx, rec := callerr.WithRecorder(context.Background())
		res, err := c.CallTool(ctx, req)
		cl := callerr.Classify(callerr.Input{Result: res, Err: err, Facts: rec.Facts(), Transport: callerr.TransportStreamableHTTP})
		r := Record{Time: start, Server: "bench", Tool: "echo", DurationMS: float64(time.Since(start).Microseconds()) / 1000,
			Status: api.StatusOK, ErrorClass: cl.Class, FaultDomain: cl.Domain, UpstreamHTTPStatus: cl.HTTPStatus, Reason: cl.Reason}
		if !cl.OK() {
			r.Status = api.StatusError
		}
		st.Add(r)
		if err != nil {
			b.Fatal(err)
		}
	}
	for range 200 { // warm up connections and the writer
		plain()
		recorded()
	}
	var tPlain, tRec []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		// Alternate so both see the same machine conditions.
		t0 := time.Now()
		if i%2 == 0 {
			plain()
			tPlain = append(tPlain, time.Since(t0))
		} else {
			recorded()
			tRec = append(tRec, time.Since(t0))
		}
	}
	b.StopTimer()
	if len(tPlain) == 0 || len(tRec) == 0 {
		return
	}
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds())
	}
	pp, pr := p50(tPlain), p50(tRec)
	b.ReportMetric(pp, "p50-plain-ns")
	b.ReportMetric(pr, "p50-recorded-ns")
	b.ReportMetric(pr-pp, "p50-added-ns")
}
