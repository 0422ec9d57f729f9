package proxyd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/otlptest"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/telemetry"
)

// upstreamTrace records the trace context each tools/call reached the
// upstream with, in the traceparent header and in params._meta.
type upstreamTrace struct {
	mu     sync.Mutex
	header map[string]string // tool argument "text" -> traceparent header
	meta   map[string]string // -> params._meta.traceparent
}

func (u *upstreamTrace) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
			Params struct {
				Arguments struct {
					Text string `json:"text"`
				} `json:"arguments"`
				Meta struct {
					Traceparent string `json:"traceparent"`
				} `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" {
			u.mu.Lock()
			u.header[m.Params.Arguments.Text] = r.Header.Get("traceparent")
			u.meta[m.Params.Arguments.Text] = m.Params.Meta.Traceparent
			u.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// A client's trace continues through proxyd to the upstream and arrives at
// a real OTLP receiver (the OpenTelemetry Collector's) as one connected
// trace with the MCP semantic-convention attributes, for a success and
// for each fault class.
func TestTracesReachOTLPReceiver(t *testing.T) {
	recv := otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.Endpoint)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "200")
	t.Setenv("OTEL_SERVICE_NAME", "proxyd-under-test")

	fx := mcpserver.New(mcpserver.Options{Era: mcpserver.EraLegacy})
	ut := &upstreamTrace{header: map[string]string{}, meta: map[string]string{}}
	srv := httptest.NewServer(ut.wrap(fx.Handler()))
	t.Cleanup(srv.Close)
	td := startDaemon(t, "listen: 127.0.0.1:0\nservers:\n  - name: fx\n    url: "+srv.URL+"/mcp\n    timeout: 500ms\n",
		func(o *Options) { o.Replica = "otel-r1" })
	waitReady(t, td, "fx")
	url, token := endpoint(t, td)

	post, sid := legacySession(t, url, token)

	type tcase struct {
		name, tool  string
		fault       *mcpserver.Fault
		class, dom  string
		upstreamHit bool
	}
	cases := []tcase{
		{name: "ok", tool: "fx__echo", upstreamHit: true},
		{name: "http", tool: "fx__echo", fault: &mcpserver.Fault{Kind: mcpserver.FaultHTTPStatus, Status: 502, Tool: "echo", Count: 1}, class: "http", dom: "upstream", upstreamHit: true},
		{name: "jsonrpc", tool: "fx__echo", fault: &mcpserver.Fault{Kind: mcpserver.FaultJSONRPCError, Tool: "echo", Count: 1}, class: "jsonrpc", dom: "upstream", upstreamHit: true},
		{name: "tool_error", tool: "fx__echo", fault: &mcpserver.Fault{Kind: mcpserver.FaultIsError, Tool: "echo", Count: 1}, class: "tool_error", dom: "upstream", upstreamHit: true},
		{name: "network", tool: "fx__echo", fault: &mcpserver.Fault{Kind: mcpserver.FaultReset, Tool: "echo", Count: 1}, class: "network", dom: "upstream", upstreamHit: true},
		{name: "timeout", tool: "fx__echo", fault: &mcpserver.Fault{Kind: mcpserver.FaultSlow, DelayMS: 3000, Tool: "echo", Count: 1}, class: "timeout", dom: "upstream", upstreamHit: true},
		{name: "auth", tool: "fx__echo", fault: &mcpserver.Fault{Kind: mcpserver.FaultHTTPStatus, Status: 401, Tool: "echo", Count: 1}, class: "auth", dom: "upstream", upstreamHit: true},
		{name: "proxy_policy", tool: "fx__nope", class: "proxy_policy", dom: "client"},
	}
	traces := map[string][2]string{} // case -> client trace id, client span id
	for i, c := range cases {
		if c.fault != nil {
			if _, err := fx.AddFault(*c.fault); err != nil {
				t.Fatal(err)
			}
		}
		tid, sid2 := randomHex(t, 16), randomHex(t, 8)
		traces[c.name] = [2]string{tid, sid2}
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"text":%q},"_meta":{"traceparent":"00-%s-%s-01"}}}`,
			100+i, c.tool, c.name, tid, sid2)
		post(sid, body)
	}
	// A CLI call continues the trace in TRACEPARENT.
	cliTrace, cliSpan := randomHex(t, 16), randomHex(t, 8)
	t.Setenv("TRACEPARENT", "00-"+cliTrace+"-"+cliSpan+"-01")
	if _, err := td.client.Call(context.Background(), api.CallRequest{Server: "fx", Tool: "echo", Arguments: json.RawMessage(`{"text":"cli"}`)}); err != nil {
		t.Fatal(err)
	}

	byTrace := func() map[string][]otlptest.Span {
		out := map[string][]otlptest.Span{}
		for _, s := range recv.Spans() {
			out[s.TraceID] = append(out[s.TraceID], s)
		}
		return out
	}
	waitfor.Cond(t, 20*time.Second, "every call's spans at the receiver", func() (bool, string) {
		got := byTrace()
		for _, c := range cases {
			want := 2
			if !c.upstreamHit {
				want = 1
			}
			if len(got[traces[c.name][0]]) < want {
				return false, fmt.Sprintf("%s: %d spans", c.name, len(got[traces[c.name][0]]))
			}
		}
		return len(got[cliTrace]) >= 2, "cli"
	})
	got := byTrace()
	find := func(spans []otlptest.Span, kind string) *otlptest.Span {
		for i := range spans {
			if spans[i].Kind == kind {
				return &spans[i]
			}
		}
		return nil
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tid, parent := traces[c.name][0], traces[c.name][1]
			spans := got[tid]
			srvSpan := find(spans, "Server")
			if srvSpan == nil {
				t.Fatalf("no server span in %+v", spans)
			}
			if srvSpan.ParentID != parent {
				t.Errorf("server span parent %s, want the client's span %s", srvSpan.ParentID, parent)
			}
			tool := strings.TrimPrefix(c.tool, "fx__")
			wantAttrs := map[string]any{
				telemetry.AttrMethod: "tools/call", telemetry.AttrToolName: c.tool,
				telemetry.AttrProtocolVersion: "2025-11-25", telemetry.AttrSessionID: sid,
			}
			if c.name != "proxy_policy" {
				wantAttrs[telemetry.AttrServer] = "fx"
			}
			for k, v := range wantAttrs {
				if srvSpan.Attrs[k] != v {
					t.Errorf("server span %s = %v, want %v (all: %v)", k, srvSpan.Attrs[k], v, srvSpan.Attrs)
				}
			}
			if _, ok := srvSpan.Attrs[telemetry.AttrRequestID]; !ok {
				t.Errorf("server span lacks %s", telemetry.AttrRequestID)
			}
			if srvSpan.Name != "tools/call "+c.tool {
				t.Errorf("server span name %q", srvSpan.Name)
			}
			if srvSpan.Resource["service.name"] != "proxyd-under-test" || srvSpan.Resource["service.instance.id"] != "otel-r1" {
				t.Errorf("resource %v", srvSpan.Resource)
			}
			checkClass := func(s *otlptest.Span) {
				if c.class == "" {
					if s.Status == "Error" || s.Attrs[telemetry.AttrErrorType] != nil {
						t.Errorf("%s span of a success marked failed: %+v", s.Kind, s)
					}
					return
				}
				if s.Status != "Error" || s.Attrs[telemetry.AttrErrorType] != c.class || s.Attrs[telemetry.AttrErrorClass] != c.class || s.Attrs[telemetry.AttrFaultDomain] != c.dom {
					t.Errorf("%s span: status %s, attrs %v; want error %s/%s", s.Kind, s.Status, s.Attrs, c.class, c.dom)
				}
			}
			checkClass(srvSpan)
			cl := find(spans, "Client")
			if !c.upstreamHit {
				if cl != nil {
					t.Errorf("a refused call has an upstream span: %+v", cl)
				}
				return
			}
			if cl == nil {
				t.Fatalf("no client span in %+v", spans)
			}
			if cl.ParentID != srvSpan.SpanID || cl.Name != "tools/call "+tool {
				t.Errorf("client span %q parent %s, want child of %s", cl.Name, cl.ParentID, srvSpan.SpanID)
			}
			if cl.Attrs[telemetry.AttrServerAddress] != "127.0.0.1" || cl.Attrs[telemetry.AttrServerPort] == nil || cl.Attrs[telemetry.AttrToolName] != tool {
				t.Errorf("client span attrs %v", cl.Attrs)
			}
			checkClass(cl)
			ut.mu.Lock()
			h, m := ut.header[c.name], ut.meta[c.name]
			ut.mu.Unlock()
			want := "00-" + tid + "-" + cl.SpanID + "-01"
			if h != want || m != want {
				t.Errorf("upstream got traceparent header %q and _meta %q, want %q", h, m, want)
			}
		})
	}
	cli := got[cliTrace]
	if s := find(cli, "Server"); s == nil || s.ParentID != cliSpan || s.Attrs[telemetry.AttrNetTransport] != "unix" {
		t.Errorf("CLI call spans %+v", cli)
	}

	waitfor.Cond(t, 20*time.Second, "operation durations and today's counters over OTLP", func() (bool, string) {
		names := recv.MetricNames()
		return names["mcp.server.operation.duration"] && names["mcp.client.operation.duration"] && names["mcpx_tool_calls_total"], fmt.Sprint(names)
	})
}
