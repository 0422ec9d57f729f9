package proxyd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

func TestMetricsListener(t *testing.T) {
	fx, err := mcpserver.Start(mcpserver.Options{Era: mcpserver.EraModern})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fx.Close() })
	td := startDaemon(t, "listen: 127.0.0.1:0\nmetrics_listen: 127.0.0.1:0\nservers:\n  - name: fx\n    url: "+fx.URL()+
		"\n  - name: off\n    url: http://127.0.0.1:1/mcp\n    disabled: true\n")
	waitReady(t, td, "fx")
	st, err := td.client.Status(context.Background())
	if err != nil || st.MetricsListen == "" {
		t.Fatalf("status %+v %v", st, err)
	}
	base := "http://" + st.MetricsListen
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if _, err := td.client.Call(context.Background(), api.CallRequest{Server: "fx", Tool: "echo", Arguments: []byte(`{"text":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/livez", "/readyz"} {
		if code, body := get(p); code != 200 || strings.TrimSpace(body) != "ok" {
			t.Errorf("%s: %d %q", p, code, body)
		}
	}
	waitfor.Cond(t, 10*time.Second, "server gauges and operation durations on /metrics", func() (bool, string) {
		_, body := get("/metrics")
		for _, want := range []string{
			`mcpx_server_up{server="fx"} 1`,
			`mcpx_server_up{server="off"} 0`,
			`mcpx_server_state{server="fx",state="ready"} 1`,
			`mcpx_server_state{server="fx",state="error"} 0`,
			`mcpx_server_state{server="off",state="disabled"} 1`,
			`mcpx_tool_calls_total{error_class="",fault_domain="",server="fx",status="ok"} 1`,
			`mcp_server_operation_duration_seconds_count{gen_ai_tool_name="echo",mcp_method_name="tools/call",mcpx_server="fx"} 1`,
			`mcp_client_operation_duration_seconds_count{`,
			"mcpx_processor_changes_total ",
			"go_sched_gomaxprocs_threads ",
		} {
			if !strings.Contains(body, want) {
				return false, fmt.Sprintf("missing %s in\n%s", want, grepLines(body, "mcp"))
			}
		}
		return true, ""
	})
	if code, _ := get("/v1/status"); code != http.StatusNotFound {
		t.Errorf("the control API is reachable on the metrics listener: %d", code)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
