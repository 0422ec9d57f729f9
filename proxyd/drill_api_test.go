package proxyd

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// runSessionDrill drives POST /v1/drill/session and returns the progress
// lines and the report.
func runSessionDrill(t *testing.T, td *testDaemon, req api.SessionDrillRequest) ([]string, *api.SessionDrillReport) {
	t.Helper()
	var progress []string
	var rep *api.SessionDrillReport
	st, err := td.client.SessionDrill(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case api.DrillEventProgress:
			progress = append(progress, ev.Message)
		case api.DrillEventReport:
			rep = ev.Report
		case api.DrillEventError:
			t.Fatalf("drill error: %+v", ev.Error)
		}
	}
	if rep == nil {
		t.Fatal("no report")
	}
	return progress, rep
}

func TestSessionDrill(t *testing.T) {
	tests := []struct {
		name          string
		lossStatus    int
		refuseDelete  bool
		includeWrites bool
		wantEndedBy   string
	}{
		{"delete, reads", 404, false, false, "delete"},
		{"delete, with writes", 404, false, true, "delete"},
		{"unknown session id", 404, true, true, "unknown_session_id"},
		{"400 deviation", 400, false, true, "delete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx, err := mcpserver.Start(mcpserver.Options{Era: mcpserver.EraLegacy, SessionLossStatus: tt.lossStatus, RefuseDelete: tt.refuseDelete})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fx.Close() })
			td := startDaemon(t, "listen: 127.0.0.1:0\nservers:\n  - name: fx\n    url: "+fx.URL()+"\n    protocol: legacy\n")
			waitReady(t, td, "fx")
			inits := fx.InitializeCount()
			progress, rep := runSessionDrill(t, td, api.SessionDrillRequest{Server: "fx", Calls: 20, IncludeWrites: tt.includeWrites})
			if len(progress) < 3 {
				t.Errorf("progress %q", progress)
			}
			if !rep.Applicable || rep.Verdict != api.VerdictPass || rep.Reinits != 1 || rep.ReadsFailed != 0 || !rep.AfterOK {
				t.Fatalf("report %+v", rep)
			}
			if rep.EndedBy != tt.wantEndedBy {
				t.Errorf("ended by %q, want %q", rep.EndedBy, tt.wantEndedBy)
			}
			if got := fx.InitializeCount() - inits; got != 1 {
				t.Errorf("%d initialize requests reached the server, want 1", got)
			}
			if rep.Calls != 20 || rep.Succeeded+rep.NotRepeated+rep.Failed != 20 {
				t.Errorf("counts %+v", rep)
			}
			if tt.includeWrites {
				if rep.Writes == 0 {
					t.Fatal("no writes planned")
				}
				// Each write ran at most once: the ones that reached the
				// lost session were not repeated.
				if got := fx.Executions("write_note"); got != rep.Writes-rep.NotRepeated {
					t.Errorf("write_note executed %d times, want %d", got, rep.Writes-rep.NotRepeated)
				}
			}
			if tt.lossStatus == 400 && !rep.Deviation {
				t.Error("400 deviation not reported")
			}
			if got := fx.Stats().MissingSessionReplies; got != 0 {
				t.Errorf("%d requests went out without a session id", got)
			}

			// Activity marks the calls that went through the re-init.
			recs, err := td.client.Activity(context.Background(), api.ActivityQuery{Servers: []string{"fx"}, Limit: 100})
			if err != nil {
				t.Fatalf("activity: %v", err)
			}
			reinit, retried := 0, 0
			for _, r := range recs {
				if r.Reinit {
					reinit++
				}
				if r.Retried {
					retried++
				}
				if r.Client != "drill" {
					t.Errorf("activity client %q", r.Client)
				}
			}
			if reinit == 0 || retried != rep.Retried {
				t.Errorf("activity: %d records marked reinit, %d retried (report: %d retried)", reinit, retried, rep.Retried)
			}

			// The counter is in metrics and in status.
			st, err := td.client.Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.Servers[0].Reinits != 1 || st.Servers[0].State != api.StateReady {
				t.Errorf("status %+v", st.Servers[0])
			}
			metrics, err := td.client.Metrics(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(metrics, `mcpx_session_reinits_total{server="fx"} 1`) {
				t.Errorf("metrics lack the re-init counter:\n%s", grep(metrics, "mcpx_session"))
			}
			// The other counters each connection and the endpoint keep.
			for _, want := range []string{`mcpx_notifications_dropped_total{server="fx"} 0`, "mcpx_listen_notifications_dropped_total 0"} {
				if !strings.Contains(metrics, want) {
					t.Errorf("metrics lack %s:\n%s", want, grep(metrics, "dropped"))
				}
			}
		})
	}
}

func TestSessionDrillNotApplicable(t *testing.T) {
	_, td := withFixture(t, mcpserver.EraBoth) // settles on the modern era
	_, rep := runSessionDrill(t, td, api.SessionDrillRequest{Server: "fx", Calls: 5})
	if rep.Applicable || rep.Verdict != api.VerdictNotApplicable || len(rep.Notes) == 0 || !strings.Contains(rep.Notes[0], "modern") {
		t.Fatalf("report %+v", rep)
	}
}

func TestSessionDrillUnknownServer(t *testing.T) {
	td := startDaemon(t, "")
	_, err := td.client.SessionDrill(context.Background(), api.SessionDrillRequest{Server: "nope", Calls: 1})
	if !api.IsCode(err, api.CodeNotFound) {
		t.Fatalf("err %v, want not_found", err)
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
