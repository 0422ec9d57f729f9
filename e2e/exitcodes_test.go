package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// exitCase is one command line and the exit code the README's table
// promises for it.
type exitCase struct {
	args []string
	want int
	// stderr, when set, must appear in the error output.
	stderr string
}

func runExitCases(t *testing.T, e *env, situation string, cases []exitCase) {
	t.Helper()
	for _, c := range cases {
		r := e.run(c.args...)
		if r.code != c.want {
			t.Errorf("%s: want exit %d\n%s", situation, c.want, r)
			continue
		}
		if c.stderr != "" && !strings.Contains(r.stderr, c.stderr) {
			t.Errorf("%s: stderr lacks %q\n%s", situation, c.stderr, r)
		}
	}
}

// TestExitCodeTable drives every command through each situation of the
// exit-code table (README "Exit codes", 'mcpx help exit-codes') against a
// real proxyd: a ready fixture, a server that cannot connect, and none.
func TestExitCodeTable(t *testing.T) {
	fx := startFixture(t, mcpserver.EraBoth)
	broken := "http://" + freeAddr(t) + "/mcp" // nothing listens there
	config := fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: fixture\n    url: %s\n  - name: broken\n    url: %s\n", fx.URL(), broken)

	// Without proxyd: every command that needs it exits 3.
	down := newEnv(t)
	down.writeConfig(config)
	runExitCases(t, down, "proxyd not running", []exitCase{
		{args: []string{"status"}, want: 3, stderr: "mcpx up"},
		{args: []string{"reload"}, want: 3},
		{args: []string{"tools"}, want: 3},
		{args: []string{"call", "fixture", "echo", "text=x"}, want: 3},
		{args: []string{"drill", "session", "fixture"}, want: 3},
		{args: []string{"drill", "refresh", "fixture"}, want: 3},
		{args: []string{"login", "fixture"}, want: 3},
		{args: []string{"logout", "fixture"}, want: 3},
		{args: []string{"connect-info"}, want: 3},
		{args: []string{"activity", "follow"}, want: 3},
		{args: []string{"resources"}, want: 3},
		{args: []string{"read", "fixture", "file:///x"}, want: 3},
		{args: []string{"prompts"}, want: 3},
		{args: []string{"prompt", "fixture", "p"}, want: 3},
		{args: []string{"rpc", "fixture", "ping"}, want: 3},
		{args: []string{"status", "fixture"}, want: 3},
		// Commands that work without proxyd.
		{args: []string{"servers", "list"}, want: 0, stderr: "proxyd is not running"},
		{args: []string{"down"}, want: 0},
		{args: []string{"probe", "https://127.0.0.1:1/mcp", "--timeout", "2s"}, want: 13, stderr: "in-process"},
		// No record to read either (proxyd never ran here).
		{args: []string{"activity"}, want: 3, stderr: "record cannot be read"},
		{args: []string{"health"}, want: 3},
		{args: []string{"auth", "status"}, want: 3},
	})

	// Without proxyd, status -o json still prints a document for a script:
	// "running": false and the configured servers, state unknown.
	r := down.run("status", "-o", "json")
	var offline api.Status
	if err := json.Unmarshal([]byte(r.stdout), &offline); r.code != 3 || err != nil {
		t.Fatalf("status -o json without proxyd: exit %d, %v\n%s", r.code, err, r)
	}
	if offline.Running || len(offline.Servers) != 2 || offline.Servers[0].Name != "fixture" || offline.Servers[1].State != api.StateUnknown || offline.Socket == "" {
		t.Errorf("status -o json without proxyd: %+v", offline)
	}
	if !strings.Contains(r.stderr, "mcpx up") {
		t.Errorf("status -o json without proxyd: stderr lacks the fix\n%s", r)
	}
	if strings.Contains(r.stdout, "started_at") || offline.StateDir == "" {
		t.Errorf("status -o json without proxyd: a start time or no state dir:\n%s", r.stdout)
	}
	var listed []api.ServerStatus
	down.runJSON(0, &listed, "servers")
	if len(listed) != 2 || listed[0].State != api.StateUnknown {
		t.Errorf("servers -o json without proxyd: %+v, want the state status gives", listed)
	}
	r = down.run("status", "broken", "-o", "json")
	var one api.ServerStatus
	if err := json.Unmarshal([]byte(r.stdout), &one); r.code != 3 || err != nil || one.Name != "broken" || one.State != api.StateUnknown {
		t.Errorf("status broken -o json without proxyd: exit %d, %v, %+v\n%s", r.code, err, one, r)
	}

	// An invalid config file.
	bad := newEnv(t)
	bad.writeConfig("servers:\n  - name: x\n    urll: https://example.test/mcp\n")
	runExitCases(t, bad, "invalid config", []exitCase{
		// Not running, and 'mcpx up' would fail: the fix comes first.
		{args: []string{"status"}, want: 3, stderr: "its config file has the error above: fix it, then start proxyd"},
		{args: []string{"up"}, want: 7, stderr: "urll"},
		{args: []string{"servers", "list"}, want: 7, stderr: "urll"},
		{args: []string{"servers", "add", "y", "https://example.test/mcp"}, want: 7},
	})

	e := newEnv(t)
	// A server whose config sets its Authorization header (a static
	// token): connected, with nothing for a refresh drill.
	e.extraEnv = append(e.extraEnv, "MCPX_E2E_STATIC=Bearer static-e2e")
	e.writeConfig(config + fmt.Sprintf("  - name: static\n    url: %s\n    headers:\n      Authorization: ${env:MCPX_E2E_STATIC}\n", fx.URL()))
	e.startProxyd()
	e.waitServer("fixture", api.StateReady)
	e.waitServer("broken", api.StateError)
	e.waitServer("static", api.StateReady)

	argsFile := filepath.Join(e.dir, "args.json")
	if err := os.WriteFile(argsFile, []byte(`{"a": 40, "b": 2}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// A server that needs no sign-in: login -o json is still a document.
	var lr api.LoginResult
	e.runJSON(0, &lr, "login", "fixture")
	if !lr.NotNeeded || lr.Server != "fixture" {
		t.Errorf("login of a server without sign-in, -o json: %+v", lr)
	}
	var running api.Status
	e.runJSON(0, &running, "status")
	if !running.Running {
		t.Errorf("status -o json of a running proxyd lacks running: true: %+v", running)
	}
	// Off a terminal a table is TSV, cells whole; -o table aligns it.
	tsv := strings.Split(e.mustRun("tools", "fixture").stdout, "\n")
	if tsv[0] != "TOOL\tSERVER\tKIND\tDESCRIPTION" || strings.Count(tsv[1], "\t") != 3 {
		t.Errorf("tools piped: not TSV:\n%s", strings.Join(tsv, "\n"))
	}
	// An empty list leaves TSV empty; the words go to stderr.
	if r := e.run("tools", "broken"); r.code != 9 || r.stdout != "" || !strings.Contains(r.stderr, "No tools: broken is in error (see 'mcpx status broken')") {
		t.Errorf("tools of a server with none, piped: want nothing on stdout:\n%s", r)
	}
	if aligned := e.mustRun("tools", "fixture", "-o", "table").stdout; strings.Contains(aligned, "\t") || !strings.HasPrefix(aligned, "TOOL   ") {
		t.Errorf("tools -o table: not aligned:\n%s", aligned)
	}
	runExitCases(t, e, "success", []exitCase{
		{args: []string{"call", "fixture", "add", "@" + argsFile}, want: 0},
		{args: []string{"status"}, want: 0},
		{args: []string{"tools", "fixture"}, want: 0},
		{args: []string{"call", "fixture", "echo", "text=x"}, want: 0},
		// A key the schema does not list is sent, with a warning naming it.
		{args: []string{"call", "fixture", "add", "a=1", "b=2", "bb=3"}, want: 0, stderr: `add has no argument "bb" (did you mean "b"?) (its arguments: a, b); sent as given`},
		{args: []string{"health", "fixture"}, want: 0},
		{args: []string{"help", "exit-codes"}, want: 0},
		{args: []string{"completion"}, want: 0},
		{args: []string{"drill", "session", "fixture", "--help"}, want: 0},
		{args: []string{"help", "servers", "add"}, want: 0},
	})

	// One code for "no such server" (and tool), with a did-you-mean.
	runExitCases(t, e, "no such server", []exitCase{
		{args: []string{"tools", "fixtur"}, want: 8, stderr: `did you mean "fixture"?`},
		{args: []string{"call", "fixtur", "echo", "text=x"}, want: 8, stderr: `did you mean "fixture"?`},
		{args: []string{"health", "nope"}, want: 8},
		{args: []string{"login", "nope"}, want: 8},
		{args: []string{"logout", "nope"}, want: 8},
		{args: []string{"drill", "session", "nope"}, want: 8},
		{args: []string{"drill", "refresh", "nope"}, want: 8},
		{args: []string{"servers", "remove", "fixtur"}, want: 8, stderr: `did you mean "fixture"?`},
		{args: []string{"probe", "nope"}, want: 8},
		{args: []string{"call", "fixture", "ech", "text=x"}, want: 8, stderr: `did you mean "echo"?`},
		// A name typed as exposed gets a hint in that form.
		{args: []string{"call", "fixture__ech", "text=x"}, want: 8, stderr: `did you mean "fixture__echo"?`},
		{args: []string{"call", "fixture", "fixture__ech", "text=x"}, want: 8, stderr: `did you mean "fixture__echo"?`},
		{args: []string{"activity", "show", "999999"}, want: 8},
		{args: []string{"activity", "999999"}, want: 8},
		{args: []string{"status", "fixtur"}, want: 8, stderr: `did you mean "fixture"?`},
		{args: []string{"resources", "nope"}, want: 8},
		{args: []string{"prompts", "nope"}, want: 8},
		{args: []string{"read", "nope", "file:///x"}, want: 8},
		{args: []string{"prompt", "nope", "p"}, want: 8},
		{args: []string{"rpc", "nope", "ping"}, want: 8},
		{args: []string{"rpc", "fixture", "tools/call", `{"name":"ech"}`}, want: 8, stderr: `did you mean "echo"?`},
		{args: []string{"auth", "status", "nope"}, want: 8},
	})

	runExitCases(t, e, "usage", []exitCase{
		{args: []string{"statsu"}, want: 2, stderr: `did you mean "status"?`},
		{args: []string{"drill", "sesion", "fixture"}, want: 2, stderr: `did you mean "session"?`},
		{args: []string{"tools", "--outptu", "json"}, want: 2, stderr: "unknown flag --outptu"},
		{args: []string{"tools", "--outptu", "json"}, want: 2, stderr: "did you mean --output?"},
		{args: []string{"status", "--bogus"}, want: 2},
		{args: []string{"reload", "--bogus"}, want: 2},
		{args: []string{"health", "-o", "xml"}, want: 2},
		{args: []string{"call", "fixture", "echo", "notkv"}, want: 2},
		{args: []string{"call", "fixture", "add", "a=1", "a=2"}, want: 2, stderr: `argument "a" is given twice`},
		{args: []string{"call", "fixture", "add", "a=x", "b=2"}, want: 2, stderr: "a: got string, want number"},
		{args: []string{"call", "fixture", "add", "b=2"}, want: 2, stderr: "error_class=proxy_policy fault_domain=client"},
		{args: []string{"call", "fixture", "add", "@" + e.dir + "/missing.json"}, want: 2},
		{args: []string{"servers", "add", "b@d", "https://example.test/mcp"}, want: 2},
		{args: []string{"servers", "add", "fixture", fx.URL()}, want: 2, stderr: "already exists"},
		{args: []string{"servers", "add", "ftp", "ftp://example.test/mcp"}, want: 2},
		{args: []string{"servers", "add", "noscheme", "example.test/mcp"}, want: 2, stderr: "no scheme"},
		{args: []string{"servers", "add", "extra", "https://example.test/mcp", "Authorization: Bearer x"}, want: 2, stderr: "a remote server takes nothing after it"},
		{args: []string{"servers", "add", "urlcmd", "--", "https://example.test/mcp", "x"}, want: 2, stderr: "is a URL"},
		{args: []string{"drill", "session", "fixture", "--calls", "0"}, want: 2},
		{args: []string{"completion", "tcsh"}, want: 2},
		{args: []string{"status", "a", "b"}, want: 2},
		{args: []string{"resources", "a", "b"}, want: 2},
		{args: []string{"prompts", "a", "b"}, want: 2},
		{args: []string{"read", "fixture"}, want: 2},
		{args: []string{"prompt", "fixture"}, want: 2},
		{args: []string{"rpc", "fixture"}, want: 2},
		{args: []string{"rpc", "fixture", "initialize"}, want: 2},
		{args: []string{"auth", "set-token", "fixture"}, want: 2, stderr: "no token on stdin"},
		{args: []string{"activity", "lst"}, want: 2, stderr: `did you mean "list"?`},
		{args: []string{"call", "fixture", "echo", "--", ""}, want: 2},
		{args: []string{"tools", "https://example.test/mcp", "extra"}, want: 2},
		// Flag values: the form named, and no timeout or limit that
		// would give up at once or mean something else.
		{args: []string{"call", "fixture", "echo", "text=x", "--timeout", "abc"}, want: 2, stderr: `--timeout: "abc" is not a duration; give one such as 10s`},
		{args: []string{"call", "fixture", "echo", "text=x", "--timeout", "10"}, want: 2, stderr: "--timeout 10: a duration needs its unit (10s"},
		{args: []string{"call", "fixture", "echo", "text=x", "--timeout", "0s"}, want: 2, stderr: "give a duration above zero"},
		{args: []string{"rpc", "fixture", "ping", "--timeout", "-1s"}, want: 2, stderr: "give a duration above zero"},
		{args: []string{"activity", "--limit", "-1"}, want: 2, stderr: "give a count of 0 or more"},
		{args: []string{"drill", "refresh", "fixture", "--callers", "0"}, want: 2, stderr: "--callers must be between 1 and 1000"},
		{args: []string{"activity", "--limit", "x"}, want: 2, stderr: `--limit: "x" is not a whole number`},
	})

	runExitCases(t, e, "the upstream failed", []exitCase{
		{args: []string{"call", "broken", "echo", "text=x"}, want: 4},
		{args: []string{"rpc", "broken", "ping"}, want: 4},
		{args: []string{"read", "broken", "file:///x"}, want: 4},
		// The tool's own error fails the command, as it does 'call'.
		{args: []string{"call", "fixture", "fail"}, want: 4, stderr: "isError: true"},
		{args: []string{"rpc", "fixture", "tools/call", `{"name":"fail"}`}, want: 4, stderr: "isError: true"},
		{args: []string{"rpc", "fixture", "tools/call", `{"name":"fail"}`, "-o", "json"}, want: 4},
	})
	runExitCases(t, e, "any other error", []exitCase{
		// Nothing answers at the server's URL: the sign-in cannot start.
		{args: []string{"login", "broken", "--timeout", "5s"}, want: 1, stderr: "OAuth discovery failed"},
		{args: []string{"login", "broken", "--timeout", "5s"}, want: 1, stderr: "mcpx auth set-token broken"},
	})
	runExitCases(t, e, "cannot connect, not for a sign-in", []exitCase{
		// A login would fail on the same cause: the drill names it.
		{args: []string{"drill", "refresh", "broken"}, want: 9, stderr: "broken is in error, not for want of a sign-in: initialize: cannot reach"},
	})
	runExitCases(t, e, "drill cannot run / unhealthy", []exitCase{
		{args: []string{"drill", "session", "broken"}, want: 9, stderr: "cannot run"},
		// Connected without a sign-in: nothing to refresh, and no point
		// in sending the user to 'mcpx login'.
		{args: []string{"drill", "refresh", "fixture"}, want: 9, stderr: "no token to refresh"},
		{args: []string{"drill", "refresh", "static"}, want: 9, stderr: "Authorization header its config sets"},
		{args: []string{"health", "broken"}, want: 9},
		{args: []string{"health"}, want: 9},
	})

	// A ready server whose calls all fail is unhealthy too.
	id, err := fx.AddFault(mcpserver.Fault{Kind: mcpserver.FaultHTTPStatus, Status: 502})
	if err != nil {
		t.Fatal(err)
	}
	for range 7 {
		if r := e.run("call", "fixture", "echo", "text=x"); r.code != 4 {
			t.Fatalf("a call answered 502: want exit 4\n%s", r)
		}
	}
	fx.RemoveFault(id)
	runExitCases(t, e, "7 of 7 calls failed", []exitCase{
		{args: []string{"health", "fixture"}, want: 9, stderr: "fixture is degraded"},
	})
	// A restart keeps the window: the new proxyd counts the calls of the
	// last minutes from the activity log, as the record read while it
	// was down does.
	var before []api.ServerStatus
	e.runJSON(9, &before, "health", "fixture")
	e.mustRun("down")
	var stopped []api.ServerStatus
	e.runJSON(3, &stopped, "health", "fixture")
	e.startProxyd()
	e.waitServer("fixture", api.StateDegraded)
	var after []api.ServerStatus
	e.runJSON(9, &after, "health", "fixture")
	if len(before) != 1 || len(stopped) != 1 || len(after) != 1 || before[0].Health == nil || stopped[0].Health == nil || after[0].Health == nil ||
		*after[0].Health != *before[0].Health || *stopped[0].Health != *before[0].Health {
		t.Errorf("health across a restart: before %+v, stopped %+v, after %+v", before, stopped, after)
	}
	// A timeout names the flag that set it.
	if _, err := fx.AddFault(mcpserver.Fault{Kind: mcpserver.FaultSlow, Tool: "echo", DelayMS: 3000, Count: 2}); err != nil {
		t.Fatal(err)
	}
	runExitCases(t, e, "timeout", []exitCase{
		{args: []string{"call", "fixture", "echo", "text=x", "--timeout", "300ms"}, want: 4, stderr: "after --timeout 300ms"},
		// Sent, and no answer in time: not "failed to send".
		{args: []string{"call", "fixture", "echo", "text=x", "--timeout", "300ms"}, want: 4, stderr: "call failed: no answer from the upstream before the call ended"},
	})

	// An invalid config file: reload keeps the running one and exits 7.
	e.writeConfig("servers: [\n")
	runExitCases(t, e, "invalid config", []exitCase{
		{args: []string{"reload"}, want: 7},
	})
	e.writeConfig(config)
}

// TestCallArgumentsFromStdin: '-' reads the JSON arguments from stdin.
func TestCallArgumentsFromStdin(t *testing.T) {
	e, _ := fixtureEnv(t, mcpserver.EraBoth, "auto")
	cmd := exec.Command(mcpxBin, append(e.globals(), "call", "fixture", "add", "-")...)
	cmd.Env = e.environ()
	cmd.Stdin = strings.NewReader(`{"a": 40, "b": 2}`)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "42") {
		t.Fatalf("mcpx call fixture add - (stdin {a:40,b:2}): %v\n%s", err, out)
	}
}

// TestStatusServer: 'mcpx status SERVER' shows the whole cause (a stdio
// child's stderr), the next step, and exits 9 for a server in error; the
// table keeps the cause and never cuts it mid-word.
func TestStatusServer(t *testing.T) {
	fx := startFixture(t, mcpserver.EraBoth)
	e := newEnv(t)
	e.writeConfig(fmt.Sprintf(`listen: 127.0.0.1:0
servers:
  - name: fixture
    url: %s
  - name: crashy
    command: sh
    args: ["-c", "echo 'starting crashy' >&2; echo 'fatal: the API key in CRASHY_KEY is missing, set it and retry' >&2; exit 1"]
`, fx.URL()))
	e.startProxyd()
	e.waitServer("fixture", api.StateReady)
	e.waitServer("crashy", api.StateError)

	r := e.run("status", "crashy")
	if r.code != 9 {
		t.Fatalf("status of a server in error: want exit 9\n%s", r)
	}
	for _, want := range []string{"state:", "error since", "fatal: the API key in CRASHY_KEY is missing, set it and retry", "next:", "check the command"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status crashy lacks %q\n%s", want, r)
		}
	}
	r = e.run("describe", "fixture")
	if r.code != 0 || !strings.Contains(r.stdout, "mcpx tools fixture") || !strings.Contains(r.stdout, " tools, ") {
		t.Errorf("describe fixture: want exit 0 with the tools and the next step\n%s", r)
	}
	var one api.ServerStatus
	e.runJSON(0, &one, "status", "fixture")
	if one.Name != "fixture" || one.State != api.StateReady {
		t.Errorf("status fixture -o json: %+v", one)
	}
	if r := e.run("status", "fixtur"); r.code != 8 || !strings.Contains(r.stderr, `did you mean "fixture"?`) {
		t.Errorf("status of an unknown server: want exit 8 with a did-you-mean\n%s", r)
	}
	// The aligned table's row keeps the end of the error whole (TSV
	// never cuts it).
	r = e.mustRun("status", "-o", "table")
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, "crashy") && !strings.Contains(line, "set it and retry") && !strings.HasSuffix(strings.Fields(line)[len(strings.Fields(line))-1], "…") {
			t.Errorf("the status table cut the cause: %q", line)
		}
	}
}

// TestUpShowsThisStartOnly: 'mcpx up' of a bad config exits 7 and shows
// what this start logged, not earlier lines of the log.
func TestUpShowsThisStartOnly(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(e.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	old := "level=ERROR msg=OLD-LINE-FROM-AN-EARLIER-START\n"
	if err := os.WriteFile(filepath.Join(e.StateDir, "proxyd.log"), []byte(strings.Repeat(old, 10)), 0o600); err != nil {
		t.Fatal(err)
	}
	e.writeConfig("servers:\n  - name: x\n    urll: https://example.test/mcp\n")
	r := e.run("up")
	if r.code != 7 || strings.Contains(r.stderr, "OLD-LINE") || !strings.Contains(r.stderr, "urll") {
		t.Errorf("up with a bad config: want exit 7 naming this start's error only\n%s", r)
	}
}
