package proxyd

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/activity"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
)

func listActivity(t *testing.T, td *testDaemon) []activity.Record {
	t.Helper()
	recs, err := td.client.Activity(context.Background(), api.ActivityQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestCallClassification drives each fixture fault through the call funnel
// and checks the classification the caller and the activity log get.
func TestCallClassification(t *testing.T) {
	fx, td := withFixture(t, mcpserver.EraLegacy)
	tests := []struct {
		name       string
		fault      *mcpserver.Fault
		tool       string
		args       string
		wantClass  string
		wantDomain string
		wantStatus int
	}{
		{"ok", nil, "echo", `{"text":"x"}`, "", "", 0},
		{"isError", nil, "fail", `{}`, callerr.ClassToolError, callerr.DomainUpstream, 0},
		{"unknown tool", nil, "nope", `{}`, callerr.ClassProxyPolicy, callerr.DomainClient, 0},
		{"502 html", &mcpserver.Fault{Kind: "http_status", Tool: "echo", Status: 502, Count: 1}, "echo", `{"text":"x"}`, callerr.ClassHTTP, callerr.DomainUpstream, 502},
		{"jsonrpc -32099", &mcpserver.Fault{Kind: "jsonrpc_error", Tool: "echo", Code: -32099, Message: "custom", Count: 1}, "echo", `{"text":"x"}`, callerr.ClassJSONRPC, callerr.DomainUpstream, 0},
		{"401", &mcpserver.Fault{Kind: "http_status", Tool: "echo", Status: 401, Count: 1}, "echo", `{"text":"x"}`, callerr.ClassAuth, callerr.DomainUpstream, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.fault != nil {
				if _, err := fx.AddFault(*tt.fault); err != nil {
					t.Fatal(err)
				}
			}
			res, err := td.client.Call(context.Background(), api.CallRequest{Server: "fx", Tool: tt.tool, Arguments: json.RawMessage(tt.args)})
			if err != nil {
				t.Fatal(err)
			}
			recs := listActivity(t, td)
			rec := recs[0]
			if rec.RequestID != res.RequestID {
				t.Fatalf("newest record %s is not this call %s", rec.RequestID, res.RequestID)
			}
			if rec.ErrorClass != tt.wantClass || rec.FaultDomain != tt.wantDomain || rec.UpstreamHTTPStatus != tt.wantStatus {
				t.Fatalf("record class=%q domain=%q status=%d reason=%q, want %q %q %d",
					rec.ErrorClass, rec.FaultDomain, rec.UpstreamHTTPStatus, rec.Reason, tt.wantClass, tt.wantDomain, tt.wantStatus)
			}
			if (tt.wantClass == "") != (rec.Status == "ok") {
				t.Fatalf("status %q for class %q", rec.Status, tt.wantClass)
			}
		})
	}
}
