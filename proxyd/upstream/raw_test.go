package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

func TestWithMeta(t *testing.T) {
	meta := json.RawMessage(`{"k":1}`)
	tests := []struct {
		name, params, want string
	}{
		{"no params", ``, `{"_meta":{"k":1}}`},
		{"empty object", `{}`, `{"_meta":{"k":1}}`},
		{"empty object with spaces", ` { } `, `{ "_meta":{"k":1}}`},
		{"fields", `{"name":"echo"}`, `{"name":"echo","_meta":{"k":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var params json.RawMessage
			if tt.params != "" {
				params = json.RawMessage(tt.params)
			}
			got := withMeta(params, meta)
			if string(got) != tt.want || !json.Valid(got) {
				t.Fatalf("withMeta(%q) = %s, want %s", tt.params, got, tt.want)
			}
		})
	}
}

func TestCallParams(t *testing.T) {
	tests := []struct {
		name, tool, args, want string
	}{
		{"no arguments", "echo", ``, `{"name":"echo"}`},
		{"null arguments", "echo", `null`, `{"name":"echo"}`},
		{"arguments", "echo", `{"text":"hi"}`, `{"name":"echo","arguments":{"text":"hi"}}`},
		{"name needing escapes", `we"ird<`, `{}`, `{"name":"we\"ird\u003c","arguments":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := callParams(tt.tool, json.RawMessage(tt.args))
			if err != nil || string(got) != tt.want || !json.Valid(got) {
				t.Fatalf("callParams = %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}

// rawRequest sets the standard headers itself; they must be the ones the
// library would set for the same request.
func TestStandardHeadersMatchLibrary(t *testing.T) {
	for _, name := range []string{"echo", "tool with spaces", "ünïcode", ""} {
		params, _ := callParams(name, json.RawMessage(`{"a":1}`))
		want := mcp.StandardHeaders(mcp.LATEST_PROTOCOL_VERSION, mcp.MethodToolsCall, params)
		got := map[string]string{mcp.HeaderMethod: string(mcp.MethodToolsCall)}
		if v, ok := mcp.EncodeHeaderValue(name); ok {
			got[mcp.HeaderName] = v
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%q: headers %v, library %v", name, got, want)
		}
	}
}

// A modern-era server checks that parameters annotated with x-mcp-header
// arrive as Mcp-Param-* headers too; proxyd mirrors them (SEP-2243).
func TestParamHeadersMirrored(t *testing.T) {
	for _, era := range []mcpserver.Era{mcpserver.EraModern, mcpserver.EraLegacy} {
		t.Run(string(era), func(t *testing.T) {
			fx := startFixture(t, era)
			m := newManager(t, config.Server{Name: "fx", URL: fx.URL()})
			c, _ := m.Get("fx")
			waitState(t, c, api.StateReady)
			if tool, ok := c.Tool(mcpserver.ToolRegionEcho); !ok || !tool.ParamHeaders {
				t.Fatalf("%s: known %v, param headers %v", mcpserver.ToolRegionEcho, ok, tool.ParamHeaders)
			}
			for _, region := range []string{"eu-west", "zürich"} {
				res, err := c.CallTool(context.Background(), mcpserver.ToolRegionEcho,
					json.RawMessage(fmt.Sprintf(`{"region":%q,"text":"hi"}`, region)))
				if err != nil {
					t.Fatalf("region %q: %v", region, err)
				}
				if res.IsError || !strings.Contains(string(res.Raw), region+": hi") {
					t.Fatalf("region %q: result %s", region, res.Raw)
				}
			}
		})
	}
}
