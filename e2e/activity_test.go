package e2e

import (
	gocsv "encoding/csv"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/activity"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// TestActivityClassificationMatrix drives every fixture failure through
// proxyd with the real CLI and checks what `mcpx activity` says about it:
// error class, fault domain and upstream HTTP status.
func TestActivityClassificationMatrix(t *testing.T) {
	fx := startFixture(t, mcpserver.EraLegacy)
	// In the legacy era any 404 on a session is a lost session; a plain
	// 404 needs the session-less era.
	modern := startFixture(t, mcpserver.EraModern)
	e := newEnv(t)
	e.writeConfig(fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: fixture\n    url: %s\n    protocol: legacy\n    max_response_bytes: 100000\n  - name: modern\n    url: %s\n    protocol: modern\n    timeout: 1s\n", fx.URL(), modern.URL()))
	e.startProxyd()
	e.waitServer("fixture", api.StateReady)
	e.waitServer("modern", api.StateReady)

	type row struct {
		name       string
		fault      *mcpserver.Fault
		tool, arg  string
		extra      []string
		class      string
		domain     string
		httpStatus int
	}
	rows := []row{
		{"success", nil, "echo", "text=ok", nil, "", "", 0},
		{"isError", nil, "fail", "", nil, "tool_error", "upstream", 0},
		{"jsonrpc standard code", &mcpserver.Fault{Kind: mcpserver.FaultJSONRPCError, Tool: "echo", Code: -32602, Message: "bad params"}, "echo", "text=x", nil, "jsonrpc", "upstream", 0},
		{"jsonrpc non-standard code", &mcpserver.Fault{Kind: mcpserver.FaultJSONRPCError, Tool: "echo", Code: -32099, Message: "custom"}, "echo", "text=x", nil, "jsonrpc", "upstream", 0},
		{"401", &mcpserver.Fault{Kind: mcpserver.FaultHTTPStatus, Tool: "echo", Status: 401}, "echo", "text=x", nil, "auth", "upstream", 401},
		{"403", &mcpserver.Fault{Kind: mcpserver.FaultHTTPStatus, Tool: "echo", Status: 403}, "echo", "text=x", nil, "auth", "upstream", 403},
		{"403 insufficient_scope", &mcpserver.Fault{Kind: mcpserver.FaultHTTPStatus, Tool: "echo", Status: 403, Scope: "notes.write"}, "echo", "text=x", nil, "auth", "upstream", 403},
		{"404 without a session (modern era)", &mcpserver.Fault{Kind: mcpserver.FaultHTTPStatus, Tool: "echo", Status: 404}, "echo", "text=x", []string{"@modern"}, "", "upstream", 404},
		{"404 with a session, write tool", &mcpserver.Fault{Kind: mcpserver.FaultHTTPStatus, Tool: "write_note", Status: 404, Session: true}, "write_note", "text=x", nil, "session_terminated", "upstream", 404},
		{"429", &mcpserver.Fault{Kind: mcpserver.FaultHTTPStatus, Tool: "echo", Status: 429}, "echo", "text=x", nil, "http", "upstream", 429},
		{"500", &mcpserver.Fault{Kind: mcpserver.FaultHTTPStatus, Tool: "echo", Status: 500}, "echo", "text=x", nil, "http", "upstream", 500},
		{"502 HTML", &mcpserver.Fault{Kind: mcpserver.FaultHTTPStatus, Tool: "echo", Status: 502}, "echo", "text=x", nil, "http", "upstream", 502},
		{"503 JSON", &mcpserver.Fault{Kind: mcpserver.FaultHTTPStatus, Tool: "echo", Status: 503, ContentType: "application/json", Body: `{"error":"maintenance"}`}, "echo", "text=x", nil, "http", "upstream", 503},
		{"reset", &mcpserver.Fault{Kind: mcpserver.FaultReset, Tool: "echo"}, "echo", "text=x", nil, "network", "upstream", 0},
		{"slower than the server's timeout", &mcpserver.Fault{Kind: mcpserver.FaultSlow, Tool: "echo", DelayMS: 4000}, "echo", "text=x", []string{"@modern"}, "timeout", "upstream", 0},
		// A deadline of the caller's own, shorter than the server's: the
		// caller gave up, which says nothing of the server.
		{"slower than the caller's --timeout", &mcpserver.Fault{Kind: mcpserver.FaultSlow, Tool: "echo", DelayMS: 3000}, "echo", "text=x", []string{"--timeout", "300ms"}, "timeout", "client", 0},
		{"malformed JSON", &mcpserver.Fault{Kind: mcpserver.FaultMalformedJSON, Tool: "echo"}, "echo", "text=x", nil, "jsonrpc", "upstream", 0},
		{"larger than max_response_bytes", &mcpserver.Fault{Kind: mcpserver.FaultHuge, Tool: "echo", Bytes: 1 << 20}, "echo", "text=x", nil, "proxy_policy", "proxy", 0},
		{"unknown tool", nil, "no_such_tool", "", nil, "proxy_policy", "client", 0},
	}
	upstreamFaults := map[string]bool{}
	for _, r := range rows {
		func() {
			server, target := "fixture", fx
			if len(r.extra) > 0 && r.extra[0] == "@modern" {
				server, target, r.extra = "modern", modern, r.extra[1:]
			}
			if r.fault != nil {
				f := *r.fault
				f.Count = 1
				if _, err := target.AddFault(f); err != nil {
					t.Fatal(err)
				}
			}
			args := []string{"call", server, r.tool}
			if r.arg != "" {
				args = append(args, r.arg)
			}
			var resp api.CallResponse
			want := 0
			if r.class != "" || r.httpStatus != 0 {
				want = 4
			}
			if r.class == "auth" {
				want = 6 // a call that needs a sign-in
			}
			if r.tool == "no_such_tool" {
				want = 8 // no such tool
			}
			e.runJSON(want, &resp, append(args, r.extra...)...)
			var recs []activity.Record
			e.runJSON(0, &recs, "activity", "--limit", "1")
			if len(recs) != 1 || recs[0].RequestID != resp.RequestID {
				t.Fatalf("%s: newest record is not this call: %+v (call %s)", r.name, recs, resp.RequestID)
			}
			got := recs[0]
			if r.class != "" && got.ErrorClass != r.class {
				t.Errorf(r.name+": error_class %q, want %q (reason %q)", got.ErrorClass, r.class, got.Reason)
			}
			if r.class == "" && r.httpStatus == 0 && got.ErrorClass != "" {
				t.Errorf(r.name+": a successful call got error_class %q", got.ErrorClass)
			}
			if r.domain != "" && got.FaultDomain != r.domain {
				t.Errorf(r.name+": fault_domain %q, want %q (reason %q)", got.FaultDomain, r.domain, got.Reason)
			}
			if got.UpstreamHTTPStatus != r.httpStatus {
				t.Errorf(r.name+": upstream_http_status %d, want %d", got.UpstreamHTTPStatus, r.httpStatus)
			}
			if got.ErrorClass != "" && got.Reason == "" {
				t.Error(r.name + ": a classified failure has no reason")
			}
			if got.FaultDomain == "upstream" {
				upstreamFaults[got.RequestID] = true
			}
			show := e.mustRun("activity", "show", fmt.Sprint(got.ID))
			if got.ErrorClass != "" && !strings.Contains(show.stdout, got.Reason) {
				t.Errorf(r.name+": activity show lacks the reason:\n%s", show.stdout)
			}
		}()
	}

	// --fault-domain upstream returns exactly the upstream-fault records.
	var ups []activity.Record
	e.runJSON(0, &ups, "activity", "--fault-domain", "upstream", "--limit", "1000")
	if len(ups) != len(upstreamFaults) {
		t.Errorf("--fault-domain upstream returned %d records, want %d", len(ups), len(upstreamFaults))
	}
	for _, r := range ups {
		if !upstreamFaults[r.RequestID] || r.FaultDomain != "upstream" {
			t.Errorf("unexpected record in --fault-domain upstream: %+v", r)
		}
	}
	// Most calls failed: the server is degraded, with the summary.
	var health []api.ServerStatus
	e.runJSON(9, &health, "health", "fixture") // unhealthy fails a CI gate
	if len(health) != 1 || health[0].State != api.StateDegraded || !strings.Contains(health[0].Health.Summary, "tool calls failed in the last 5 min") {
		t.Errorf("health %+v, want degraded with the summary", health)
	}
	// Vocabulary is checked, with the valid values named.
	r := e.run("activity", "--fault-domain", "martians")
	if r.code != 2 || !strings.Contains(r.stderr, "upstream") {
		t.Errorf("bad --fault-domain: %s", r)
	}
	// Export streams CSV with a header and one line per record.
	csv := e.mustRun("activity", "export", "--format", "csv")
	if lines := strings.Count(csv.stdout, ",cli,"); lines != len(rows) {
		t.Errorf("csv export has %d records, want %d:\n%s", lines, len(rows), csv.stdout)
	}
	// upstream_http_status is empty where none was recorded, as JSON
	// leaves it out, never a status 0.
	recs, err := gocsv.NewReader(strings.NewReader(csv.stdout)).ReadAll()
	if err != nil || len(recs) != len(rows)+1 {
		t.Fatalf("csv export: %v, %d lines", err, len(recs))
	}
	col := slices.Index(recs[0], "upstream_http_status")
	statuses := map[string]int{}
	for _, rec := range recs[1:] {
		statuses[rec[col]]++
	}
	if statuses["0"] != 0 || statuses[""] == 0 || statuses["502"] != 1 {
		t.Errorf("csv upstream_http_status values: %v", statuses)
	}
	var sum []activity.SummaryRow
	e.runJSON(0, &sum, "activity", "summary", "--by", "error_class")
	if len(sum) < 5 {
		t.Errorf("summary by error_class: %+v", sum)
	}
}
