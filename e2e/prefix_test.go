package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/fixtures/conformance"
	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/activity"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// TestPrefixes runs three fixture servers behind one proxyd: "alpha"
// without a prefix, "beta" with "gh_", and "gamma" without a prefix as
// well, so every gamma tool collides with alpha's and is left out.
func TestPrefixes(t *testing.T) {
	alpha, beta, gamma := startFixture(t, mcpserver.EraBoth), startFixture(t, mcpserver.EraBoth), startFixture(t, mcpserver.EraBoth)
	e := newEnv(t)
	e.writeConfig(fmt.Sprintf(`listen: 127.0.0.1:0
servers:
  - name: alpha
    url: %s
    prefix: ""
  - name: beta
    url: %s
    prefix: "gh_"
  - name: gamma
    url: %s
    prefix: ""
`, alpha.URL(), beta.URL(), gamma.URL()))
	p := e.startProxyd()
	for _, name := range []string{"alpha", "beta", "gamma"} {
		e.waitServer(name, api.StateReady)
	}
	names := alpha.ToolNames()

	// mcpx tools: alpha's names as they are, beta's behind gh_, gamma's
	// left out with the reason.
	var tools []api.Tool
	e.runJSON(0, &tools, "tools")
	for _, tl := range tools {
		want := map[string]string{"alpha": tl.Name, "beta": "gh_" + tl.Name, "gamma": tl.Name}[tl.Server]
		if tl.Exposed != want {
			t.Errorf("tool %s of %s exposed as %q, want %q", tl.Name, tl.Server, tl.Exposed, want)
		}
		if left := tl.LeftOut != ""; left != (tl.Server == "gamma") || left && !strings.Contains(tl.LeftOut, "alpha") {
			t.Errorf("tool %s of %s: left_out %q", tl.Name, tl.Server, tl.LeftOut)
		}
	}
	if r := e.mustRun("tools", "gamma"); !strings.Contains(r.stdout, "left out") {
		t.Errorf("tools table does not mark gamma's tools left out:\n%s", r)
	}

	// mcpx status: the warnings are gamma's, one per tool, in JSON and in
	// the table; the log says it too.
	waitFor(t, "gamma's warnings in status", func() (bool, string) {
		st := e.status()
		for _, s := range st.Servers {
			if s.Name == "gamma" {
				return len(s.Warnings) == len(names), fmt.Sprintf("%+v", s)
			}
		}
		return false, "no gamma"
	})
	for _, s := range e.status().Servers {
		switch {
		case s.Name != "gamma" && len(s.Warnings) > 0:
			t.Errorf("server %s has warnings: %q", s.Name, s.Warnings)
		case s.Name == "gamma" && !strings.Contains(s.Warnings[0], `is already exposed by server "alpha"`):
			t.Errorf("gamma's warning does not name the holder: %q", s.Warnings)
		}
	}
	if r := e.mustRun("status"); !strings.Contains(r.stdout, `warning: gamma: tool "echo" is left out`) {
		t.Errorf("status table lacks the warning:\n%s", r)
	}
	waitFor(t, "the collision in proxyd's log", func() (bool, string) {
		log := p.stderr.String()
		return strings.Contains(log, "name collision") && strings.Contains(log, "kept_by=alpha"), log
	})

	// An MCP client sees each name once, and each answers from its server.
	ci := e.connectInfo()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	tr, err := transport.NewStreamableHTTP(ci.URL, transport.WithHTTPHeaders(bearerHeader(ci)))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	initClient(t, ctx, c)
	listed := listToolNames(t, ctx, c)
	var want []string
	for _, n := range names {
		want = append(want, n, "gh_"+n)
	}
	slices.Sort(listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("tools/list through proxyd:\n got %v\nwant %v", listed, want)
	}
	if got := callText(t, ctx, c, "echo", map[string]any{"text": "a"}); got != "a" {
		t.Errorf("echo returned %q", got)
	}
	if got := callText(t, ctx, c, "gh_echo", map[string]any{"text": "b"}); got != "b" {
		t.Errorf("gh_echo returned %q", got)
	}
	if a, b, g := alpha.Executions("echo"), beta.Executions("echo"), gamma.Executions("echo"); a != 1 || b != 1 || g != 0 {
		t.Errorf("echo executions: alpha %d, beta %d, gamma %d; want 1, 1, 0", a, b, g)
	}
	// A name nobody exposes is recorded against the server whose prefix
	// it carries.
	if r, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "gh_no_such_tool"}}); err == nil && !r.IsError {
		t.Errorf("gh_no_such_tool succeeded: %+v", r)
	}
	waitFor(t, "the unknown tool in activity", func() (bool, string) {
		var recs []activity.Record
		e.runJSON(0, &recs, "activity", "--limit", "1")
		return len(recs) == 1 && recs[0].Server == "beta" && recs[0].Tool == "no_such_tool", fmt.Sprintf("%+v", recs)
	})

	// mcpx call takes the upstream's name with the server, or the exposed
	// name alone or with the server.
	calls := []struct {
		args           []string
		code           int
		server, answer string
	}{
		{[]string{"alpha", "echo", "text=v1"}, 0, "alpha", "v1"},
		{[]string{"echo", "text=v2"}, 0, "alpha", "v2"},
		{[]string{"gh_echo", "text=v3"}, 0, "beta", "v3"},
		{[]string{"beta", "gh_echo", "text=v4"}, 0, "beta", "v4"},
		{[]string{"beta", "echo", `{"text": "v5"}`}, 0, "beta", "v5"},
		{[]string{"gh_echo", `{"text": "v6"}`}, 0, "beta", "v6"},
		{[]string{"gamma", "echo", "text=v7"}, 0, "gamma", "7"}, // left out for clients, not for the CLI
		{[]string{"get_time"}, 0, "alpha", ""},
		{[]string{"alpha", "gh_echo", "text=x"}, 8, "alpha", ""},
		{[]string{"no_such_tool", "text=x"}, 8, "", ""},
	}
	for _, tc := range calls {
		var res api.CallResponse
		r := e.runJSON(tc.code, &res, append([]string{"call"}, tc.args...)...)
		if res.Server != tc.server || !strings.Contains(string(res.Result), tc.answer) {
			t.Errorf("call %q: server %q, result %s; want server %q answering %q\n%s", tc.args, res.Server, res.Result, tc.server, tc.answer, r)
		}
		if tc.code != 0 && (res.Error == nil || res.Error.ErrorClass == "") {
			t.Errorf("call %q: want a classified error:\n%s", tc.args, r)
		}
	}
	if r := e.run("call", "beta"); r.code != 2 || !strings.Contains(r.stderr, "name one of its tools") {
		t.Errorf("call with a server and no tool: want exit 2 and a hint:\n%s", r)
	}
}

// TestPrefixPrompts: two servers without a prefix expose the same prompts;
// the first keeps them, the second's are left out with warnings, and the
// kept prompts answer through proxyd under the upstream's own names.
func TestPrefixPrompts(t *testing.T) {
	var urls []string
	for range 2 {
		fx, err := conformance.Start(conformance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fx.Close() })
		urls = append(urls, fx.URL())
	}
	e := newEnv(t)
	e.writeConfig(fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: one\n    url: %s\n    prefix: \"\"\n  - name: two\n    url: %s\n    prefix: \"\"\n", urls[0], urls[1]))
	e.startProxyd()
	e.waitServer("one", api.StateReady)
	e.waitServer("two", api.StateReady)
	waitFor(t, "two's prompt warnings", func() (bool, string) {
		for _, s := range e.status().Servers {
			if s.Name == "two" {
				return slices.ContainsFunc(s.Warnings, func(w string) bool {
					return strings.HasPrefix(w, `prompt "test_simple_prompt" is left out`)
				}), fmt.Sprintf("%q", s.Warnings)
			}
		}
		return false, "no server two"
	})

	// mcpx prompts marks two's prompts left out, as mcpx tools does tools.
	var listed []api.Prompt
	e.runJSON(0, &listed, "prompts")
	for _, p := range listed {
		if left := p.LeftOut != ""; left != (p.Server == "two") || left && !strings.Contains(p.LeftOut, "already exposed by server one") {
			t.Errorf("prompt %s of %s: left_out %q", p.Name, p.Server, p.LeftOut)
		}
	}
	if r := e.mustRun("prompts", "two"); !strings.Contains(r.stdout, "left out: the name is already exposed by server one") {
		t.Errorf("the prompts table does not mark two's prompts left out:\n%s", r)
	}
	// And mcpx resources the URIs both list, which one serves (URIs take
	// no prefix).
	var resources []api.Resource
	e.runJSON(0, &resources, "resources")
	uris := 0
	for _, r := range resources {
		if r.URI == "" {
			continue // a template: every one is offered
		}
		uris++
		if left := r.LeftOut != ""; left != (r.Server == "two") || left && !strings.Contains(r.LeftOut, "already served by server one") {
			t.Errorf("resource %s of %s: left_out %q", r.URI, r.Server, r.LeftOut)
		}
	}
	if uris == 0 {
		t.Error("mcpx resources listed no resource URI")
	}
	if r := e.mustRun("resources", "two"); !strings.Contains(r.stdout, "left out: the URI is already served by server one") {
		t.Errorf("the resources table does not mark two's resources left out:\n%s", r)
	}

	ci := e.connectInfo()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	tr, err := transport.NewStreamableHTTP(ci.URL, transport.WithHTTPHeaders(bearerHeader(ci)))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	initClient(t, ctx, c)
	prompts, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, p := range prompts.Prompts {
		seen[p.Name]++
	}
	if seen["test_simple_prompt"] != 1 || seen["test_prompt_with_arguments"] != 1 {
		t.Errorf("prompts through proxyd: %v", seen)
	}
	got, err := c.GetPrompt(ctx, mcp.GetPromptRequest{Params: mcp.GetPromptParams{Name: "test_prompt_with_arguments", Arguments: map[string]string{"arg1": "x", "arg2": "y"}}})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("get prompt: %+v, %v", got, err)
	}
	if txt, _ := got.Messages[0].Content.(mcp.TextContent); txt.Text != "Prompt with arguments: arg1='x', arg2='y'" {
		t.Errorf("prompt text %q", txt.Text)
	}
}
