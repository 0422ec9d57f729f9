package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/activity"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// TestResourcesPromptsRPC: resources, read, prompts, prompt and rpc go
// through proxyd to a real server (server-everything) with activity and
// classification; images, resource links and binary resources print
// readably and --save writes them.
func TestResourcesPromptsRPC(t *testing.T) {
	peers := peersDir(t)
	e := newEnv(t)
	e.writeConfig(fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: everything\n    url: %s\n", startEverythingHTTP(t, peers)))
	e.startProxyd()
	e.waitServer("everything", api.StateReady)
	save := filepath.Join(e.dir, "saved")

	var res []api.Resource
	e.runJSON(0, &res, "resources", "everything")
	if !strings.Contains(fmt.Sprint(res), "demo://resource/dynamic") {
		t.Errorf("resources lack the dynamic templates: %+v", res)
	}
	checks := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"resources"}, 0, []string{"\tdemo://resource/dynamic/text/{resourceId}\t", "\ttemplate\n"}},
		{[]string{"read", "everything", "demo://resource/dynamic/text/1"}, 0, []string{"[resource] demo://resource/dynamic/text/1", "Resource 1"}},
		{[]string{"read", "everything", "demo://resource/dynamic/blob/2", "--save", save}, 0, []string{"[resource] demo://resource/dynamic/blob/2", "saved to " + save}},
		{[]string{"prompts", "everything"}, 0, []string{"everything__args-prompt", "city*"}},
		{[]string{"prompt", "everything", "args-prompt", "city=Paris"}, 0, []string{"USER:", "Paris"}},
		{[]string{"prompt", "everything", "everything__simple-prompt"}, 0, []string{"USER:"}},
		{[]string{"prompt", "everything", "no-such-prompt"}, 8, nil},
		{[]string{"prompt", "everything__simple-prompt"}, 0, []string{"USER:"}},
		{[]string{"prompt", "everything__args-prompt", "city=Paris"}, 0, []string{"Paris"}},
		{[]string{"rpc", "everything", "ping"}, 0, []string{"{}"}},
		{[]string{"rpc", "everything", "prompts/list"}, 0, []string{"args-prompt"}},
		{[]string{"rpc", "everything", "no/such/method"}, 4, nil},
		{[]string{"rpc", "everything", "initialize"}, 2, nil},
		{[]string{"rpc", "everything", "ping", "[1]"}, 2, nil},
		{[]string{"rpc", "nope", "ping"}, 8, nil},
		{[]string{"call", "everything", "get-tiny-image", "--save", save}, 0, []string{"[image] image/png", "saved to " + save}},
		{[]string{"call", "everything", "get-tiny-image"}, 0, []string{"[image] image/png", "--save DIR"}},
		{[]string{"call", "everything", "get-resource-links", "count=2"}, 0, []string{"[resource_link]", "demo://resource/dynamic/"}},
	}
	for _, c := range checks {
		r := e.run(c.args...)
		if r.code != c.code {
			t.Errorf("want exit %d\n%s", c.code, r)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("stdout lacks %q\n%s", w, r)
			}
		}
	}
	// What the command line can tell before asking: a required argument
	// missing, a name not listed (with the nearest), a key not taken.
	for _, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"prompt", "everything", "args-prompt"}, 2, "prompt everything__args-prompt needs city=VALUE"},
		{[]string{"prompt", "everything", "simple-promp"}, 8, `did you mean "simple-prompt"?`},
		{[]string{"prompt", "everything__simple-promp"}, 8, `no server exposes a prompt named "everything__simple-promp" (did you mean "everything__simple-prompt"?)`},
		{[]string{"prompt", "everything", "args-prompt", "city=Paris", "ctiy=Rome"}, 0, `prompt everything__args-prompt has no argument "ctiy" (did you mean "city"?)`},
		{[]string{"prompt", "everything", "city=Paris"}, 2, "prompt needs NAME after SERVER everything, before city=Paris"},
		{[]string{"prompt", "everything"}, 2, "prompt needs NAME after SERVER everything"},
		// A read the server refuses: of a URI it does not list (the
		// nearest it does named), or of one its template matches.
		{[]string{"read", "everything", "demo://resource/static/document/feature.md"}, 8, `did you mean "demo://resource/static/document/features.md"?`},
		{[]string{"read", "everything", "demo://resource/dynamic/text/0"}, 4, "Unknown resource"},
	} {
		if r := e.run(c.args...); r.code != c.code || !strings.Contains(r.stderr, c.stderr) {
			t.Errorf("want exit %d and %q on stderr\n%s", c.code, c.stderr, r)
		}
	}
	files, _ := os.ReadDir(save)
	if len(files) != 2 {
		t.Errorf("--save wrote %d files, want 2 (a blob and an image)", len(files))
	}
	for _, f := range files {
		if fi, _ := f.Info(); fi == nil || fi.Size() == 0 {
			t.Errorf("saved file %s is empty", f.Name())
		}
	}
	if testing.Verbose() {
		for _, a := range [][]string{{"resources"}, {"prompts"}, {"call", "everything", "get-resource-links", "count=2"}, {"read", "everything", "demo://resource/dynamic/blob/2"}, {"prompt", "everything", "args-prompt", "city=Paris"}} {
			t.Log(e.run(a...).stdout)
		}
	}
	// Recorded and classified like calls.
	var recs []activity.Record
	e.runJSON(0, &recs, "activity", "--limit", "100")
	seen := map[string]string{}
	for _, r := range recs {
		seen[r.Tool] = r.ErrorClass
	}
	for tool, class := range map[string]string{"resources/read demo://resource/dynamic/text/1": "", "prompts/get args-prompt": "", "ping": "", "no/such/method": "jsonrpc"} {
		if got, ok := seen[tool]; !ok || got != class {
			t.Errorf("activity record %q: class %q (recorded %v), want %q", tool, got, ok, class)
		}
	}
}

// TestAdHocTargets: 'mcpx tools URL', 'mcpx call URL TOOL' and the stdio
// form after '--' run through proxyd when it is up (recorded as an ad-hoc
// server) and in-process when it is not, and say which on stderr.
func TestAdHocTargets(t *testing.T) {
	peers := peersDir(t)
	fx := startFixture(t, mcpserver.EraBoth)
	stdio := []string{"--", filepath.Join(peers, nodeRel), filepath.Join(peers, everythingRel)}
	dead := "http://" + freeAddr(t) + "/mcp"

	e := newEnv(t)
	e.writeConfig("listen: 127.0.0.1:0\n")
	checks := func(situation, note string) {
		t.Helper()
		for _, c := range []struct {
			args []string
			code int
			out  string
		}{
			{[]string{"tools", fx.URL()}, 0, "echo"},
			{[]string{"call", fx.URL(), "echo", "text=one-shot"}, 0, "one-shot"},
			{append([]string{"tools"}, stdio...), 0, "get-tiny-image"},
			{append([]string{"call", "echo", "message=via-stdio"}, stdio...), 0, "via-stdio"},
			{[]string{"call", dead, "echo", "text=x"}, 4, ""},
		} {
			r := e.run(c.args...)
			if r.code != c.code || !strings.Contains(r.stdout, c.out) || !strings.Contains(r.stderr, note) {
				t.Errorf("%s: want exit %d, %q on stdout and %q on stderr\n%s", situation, c.code, c.out, note, r)
			}
		}
	}
	checks("without proxyd", "in-process (not recorded)")
	e.startProxyd()
	checks("through proxyd", "through proxyd as ad-hoc server adhoc-")
	var recs []activity.Record
	e.runJSON(0, &recs, "activity", "--server", "adhoc-127-0-0-1", "--tool", "echo")
	if len(recs) != 2 {
		t.Errorf("want the 2 ad-hoc echo calls (one failed) in activity, got %+v", recs)
	}
	// Nothing was added to the configuration.
	if st := e.status(); len(st.Servers) != 0 {
		t.Errorf("ad-hoc servers appear in status: %+v", st.Servers)
	}
}
