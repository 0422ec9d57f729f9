package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// TestFixtureBothEras drives status, servers, tools and call against the
// fixture pinned to each protocol era.
func TestFixtureBothEras(t *testing.T) {
	tests := []struct {
		name     string
		era      mcpserver.Era
		protocol string
		wantEra  string
	}{
		{name: "legacy", era: mcpserver.EraLegacy, protocol: "legacy", wantEra: "legacy"},
		{name: "modern", era: mcpserver.EraModern, protocol: "modern", wantEra: "modern"},
		{name: "auto-negotiated", era: mcpserver.EraBoth, protocol: "auto", wantEra: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fx := startFixture(t, tc.era)
			e := newEnv(t)
			e.writeConfig(fixtureConfig(fx.URL(), tc.protocol))
			e.startProxyd()
			s := e.waitServer("fixture", api.StateReady)
			if tc.wantEra != "" && s.Era != tc.wantEra {
				t.Errorf("era %q, want %q", s.Era, tc.wantEra)
			}
			if want := len(fx.ToolNames()); s.Tools != want {
				t.Errorf("status counts %d tools, the fixture has %d", s.Tools, want)
			}
			checkStatusFormats(t, e)
			checkTools(t, e, fx)
			checkCalls(t, e)
		})
	}
}

func checkStatusFormats(t *testing.T, e *env) {
	t.Helper()
	st := e.status()
	if st.Socket != e.Socket || st.PID == 0 || st.Version == "" || !strings.HasPrefix(st.MCPURL, "http://127.0.0.1:") {
		t.Errorf("status JSON: socket %q pid %d version %q mcp_url %q", st.Socket, st.PID, st.Version, st.MCPURL)
	}

	r := e.run("status", "-o", "yaml")
	var y struct {
		Socket  string `yaml:"socket"`
		Servers []struct {
			Name  string    `yaml:"name"`
			State api.State `yaml:"state"`
		} `yaml:"servers"`
	}
	if r.code != 0 {
		t.Fatalf("status -o yaml:\n%s", r)
	}
	if err := yaml.Unmarshal([]byte(r.stdout), &y); err != nil {
		t.Fatalf("decoding status YAML: %v\n%s", err, r)
	}
	if y.Socket != e.Socket || len(y.Servers) != 1 || y.Servers[0].Name != "fixture" || y.Servers[0].State != api.StateReady {
		t.Errorf("status YAML: %+v", y)
	}

	r = e.mustRun("status")
	for _, want := range []string{"fixture", "ready", e.Socket} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status table: want %q:\n%s", want, r)
		}
	}

	// Global flags after the command, and no env or leading flags at all.
	r = e.runRaw("status", "--socket", e.Socket, "-o", "json")
	var st2 api.Status
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st2) != nil || st2.PID != st.PID {
		t.Errorf("status --socket S after the command:\n%s", r)
	}
	r = e.runRaw("servers", "-o", "json", "--config", e.Config, "--socket", e.Socket)
	var list []api.ServerStatus
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil || len(list) != 1 || list[0].Name != "fixture" {
		t.Errorf("servers -o json --config C --socket S:\n%s", r)
	}
	if r := e.run("status", "-o", "xml"); r.code != 2 {
		t.Errorf("an unknown output format: want exit 2 (usage):\n%s", r)
	}
}

func checkTools(t *testing.T, e *env, fx *mcpserver.Server) {
	t.Helper()
	// Flags after the positional argument.
	var tools []api.Tool
	e.runJSON(0, &tools, "tools", "fixture")
	var exposed []string
	for _, tl := range tools {
		exposed = append(exposed, tl.Exposed)
		if tl.Server != "fixture" || tl.Exposed != "fixture__"+tl.Name {
			t.Errorf("tool %+v: want server fixture and exposed name fixture__%s", tl, tl.Name)
		}
	}
	for _, name := range fx.ToolNames() {
		if !slices.Contains(exposed, "fixture__"+name) {
			t.Errorf("tools: fixture__%s missing from %v", name, exposed)
		}
	}
	byName := map[string]api.Tool{}
	for _, tl := range tools {
		byName[tl.Name] = tl
	}
	if echo := byName["echo"]; !echo.ReadOnly || echo.Destructive || !strings.Contains(string(echo.InputSchema), `"text"`) {
		t.Errorf("echo: want read-only, not destructive, schema with text: %+v", echo)
	}
	if del := byName["delete_notes"]; !del.Destructive {
		t.Errorf("delete_notes: want destructive: %+v", del)
	}

	r := e.run("tools", "fixture", "-o", "yaml")
	if r.code != 0 || !strings.Contains(r.stdout, "exposed_name: fixture__echo") {
		t.Errorf("tools -o yaml:\n%s", r)
	}
	r = e.mustRun("tools")
	if !strings.Contains(r.stdout, "fixture__echo") && !strings.Contains(r.stdout, "echo") {
		t.Errorf("tools table: want echo:\n%s", r)
	}
	if r := e.run("tools", "nosuch"); r.code == 0 {
		t.Errorf("tools of an unknown server exited 0:\n%s", r)
	}
}

func checkCalls(t *testing.T, e *env) {
	t.Helper()
	tests := []struct {
		name      string
		args      []string
		code      int
		isError   bool
		wantClass string // error.error_class; "" means no error object
		wantText  string
	}{
		{name: "ok", args: []string{"echo", "text=hello"}, code: 0, wantText: "hello"},
		{name: "json-args", args: []string{"add", `{"a": 2, "b": 3}`}, code: 0, wantText: "5"},
		{name: "kv-numbers", args: []string{"add", "a=40", "b=2"}, code: 0, wantText: "42"},
		{name: "is-error", args: []string{"fail"}, code: 4, isError: true},
		{name: "unknown-tool", args: []string{"no_such_tool"}, code: 8, wantClass: "any"},
		// KEY=VALUE typed by the input schema: a string stays a string.
		{name: "kv-string-digits", args: []string{"echo", "text=123"}, code: 0, wantText: "123"},
		// Checked against the schema before sending: the caller's fault.
		{name: "schema-mismatch", args: []string{"add", "a=x", "b=2"}, code: 2, wantClass: "any"},
		{name: "schema-missing", args: []string{"add", "b=2"}, code: 2, wantClass: "any"},
	}
	// No subtests here: env's helpers fail the test that owns the env.
	for _, tc := range tests {
		var res api.CallResponse
		r := e.runJSON(tc.code, &res, append([]string{"call", "fixture"}, tc.args...)...)
		if res.IsError != tc.isError {
			t.Errorf("%s: is_error %v, want %v:\n%s", tc.name, res.IsError, tc.isError, r)
		}
		switch {
		case tc.wantClass == "" && res.Error != nil:
			t.Errorf("%s: unexpected error %+v:\n%s", tc.name, res.Error, r)
		case tc.wantClass != "" && (res.Error == nil || res.Error.ErrorClass == "" || res.Error.FaultDomain == ""):
			t.Errorf("%s: want an error with error_class and fault_domain:\n%s", tc.name, r)
		}
		if tc.wantText != "" && !strings.Contains(string(res.Result), tc.wantText) {
			t.Errorf("%s: result %s does not contain %q", tc.name, res.Result, tc.wantText)
		}
		// The table form: same exit code, the text on stdout.
		tr := e.run(append([]string{"call", "fixture"}, tc.args...)...)
		if tr.code != tc.code {
			t.Errorf("%s: table form: exit %d, want %d:\n%s", tc.name, tr.code, tc.code, tr)
		}
		if tc.wantText != "" && !strings.Contains(tr.stdout, tc.wantText) {
			t.Errorf("%s: table form: want %q on stdout:\n%s", tc.name, tc.wantText, tr)
		}
		if tc.wantClass != "" && !strings.Contains(tr.stderr, "error_class=") {
			t.Errorf("%s: table form: want the error class on stderr:\n%s", tc.name, tr)
		}
	}
	if r := e.run("call", "fixture"); r.code != 2 {
		t.Errorf("call without TOOL: want exit 2:\n%s", r)
	}
	// The name MCP clients see works alone and with the server.
	for _, args := range [][]string{{"fixture__echo", "text=exposed"}, {"fixture", "fixture__echo", "text=exposed"}} {
		var res api.CallResponse
		r := e.runJSON(0, &res, append([]string{"call"}, args...)...)
		if res.Server != "fixture" || res.Tool != "echo" || !strings.Contains(string(res.Result), "exposed") {
			t.Errorf("call %q: want fixture's echo:\n%s", args, r)
		}
	}
	if r := e.run("call", "nosuch", "echo", "text=x"); r.code == 0 {
		t.Errorf("call on an unknown server exited 0:\n%s", r)
	}
}
