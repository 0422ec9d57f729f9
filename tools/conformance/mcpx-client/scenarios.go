package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// handler exercises one scenario's server through mcpx.
type handler func(m *mcpx, sc scenarioContext) error

// handlers are the scenarios that need more than listing the tools and
// calling the first one; auth/* scenarios sign in first (signIn).
var handlers = map[string]handler{
	// The suite's tools for these take two numbers.
	"initialize": callFirst(`{"a":2,"b":3}`),
	"tools_call": callFirst(`{"a":2,"b":3}`),
	// The server serves tools/list only: a client lists, and never fetches
	// a $ref's network URI.
	"json-schema-ref-no-deref": listOnly,
	"request-metadata":         listOnly,
	// Echo the schema proxyd listed: keywords it dropped would show.
	"json-schema-2020-12-preservation": echoSchema,
	// A malformed x-mcp-header annotation leaves out that tool only.
	"http-invalid-tool-headers": callTool("valid_tool", `{"region":"us-west1"}`),
	// Mcp-Method and Mcp-Name on every kind of request: a tool call, a
	// resource read and a prompt, the last two through proxyd's endpoint.
	"http-standard-headers": everyRequestKind,
	// The server asks for input with defaults; mcpx call answers with them.
	"elicitation-sep1034-client-defaults": callElicit("test_client_elicitation_defaults", "defaults"),
	"sep-2322-client-request-state":       requestState,
	"sse-retry":                           callFirst(`{}`),
	// Skills: listing reads no file; loading verifies each file it reads
	// and stops at the first that fails (these servers tamper with one).
	"sep-2640-client-no-prefetch":        listSkills,
	"sep-2640-client-verify-digest":      loadSkill("pdf-processing"),
	"sep-2640-client-verify-size":        loadSkill("pdf-processing"),
	"sep-2640-client-verify-frontmatter": loadSkill("pdf-processing"),
}

func listSkills(m *mcpx, _ scenarioContext) error {
	if _, err := m.tools(); err != nil {
		return err
	}
	_, err := m.run("skills", serverName, "-o", "json")
	return err
}

// loadSkill loads a skill the server has tampered with: mcpx skills must
// refuse it (exit 4) without reading the skill's other files.
func loadSkill(name string) handler {
	return func(m *mcpx, sc scenarioContext) error {
		if err := listSkills(m, sc); err != nil {
			return err
		}
		_, err := m.run("skills", serverName, name, "-o", "json")
		var ee *exitError
		if errors.As(err, &ee) && ee.code == 4 {
			return nil // refused, as it must be
		}
		if err == nil {
			return errors.New("mcpx skills loaded a skill whose files do not match its entry")
		}
		return err
	}
}

func handlerFor(scenario string) handler {
	if h, ok := handlers[scenario]; ok {
		return h
	}
	if strings.HasPrefix(scenario, "auth/") {
		return signIn
	}
	return callFirst(`{}`)
}

// tools waits for proxyd to connect the server and lists its tools. A
// server that needs no sign-in is waited for until it is ready.
func (m *mcpx) tools() ([]tool, error) {
	state, err := m.waitSettled(!m.signedIn)
	if err != nil {
		return nil, err
	}
	if state == "error" {
		out, _ := m.run("status")
		return nil, fmt.Errorf("server %s in state error: %s", serverName, strings.TrimSpace(out))
	}
	out, err := m.run("tools", serverName, "-o", "json")
	if err != nil {
		return nil, err
	}
	var ts []tool
	if err := json.Unmarshal([]byte(out), &ts); err != nil {
		return nil, fmt.Errorf("decoding mcpx tools output: %w", err)
	}
	return ts, nil
}

type tool struct {
	Name        string          `json:"name"`
	InputSchema json.RawMessage `json:"input_schema"`
}

func listOnly(m *mcpx, _ scenarioContext) error {
	_, err := m.tools()
	return err
}

// callFirst lists the tools and calls the first with args, then makes
// every call the scenario asks for.
func callFirst(args string) handler {
	return func(m *mcpx, sc scenarioContext) error {
		ts, err := m.tools()
		if err != nil {
			return err
		}
		if len(sc.ToolCalls) > 0 {
			return m.scenarioCalls(sc)
		}
		if len(ts) == 0 {
			return nil
		}
		_, err = m.run("call", serverName, ts[0].Name, args, "-o", "json")
		return err
	}
}

func (m *mcpx) scenarioCalls(sc scenarioContext) error {
	for _, c := range sc.ToolCalls {
		args, err := withoutNulls(c.Arguments)
		if err != nil {
			return fmt.Errorf("arguments of %s: %w", c.Name, err)
		}
		if _, err := m.run("call", serverName, c.Name, args, "-o", "json"); err != nil {
			return err
		}
	}
	return nil
}

func callTool(name, args string) handler {
	return func(m *mcpx, _ scenarioContext) error {
		if _, err := m.tools(); err != nil {
			return err
		}
		_, err := m.run("call", serverName, name, args, "-o", "json")
		return err
	}
}

// callElicit calls name, answering the server's requests for input as
// --elicit says.
func callElicit(name, answer string) handler {
	return func(m *mcpx, _ scenarioContext) error {
		if _, err := m.tools(); err != nil {
			return err
		}
		_, err := m.run("call", serverName, name, "{}", "--elicit", answer, "-o", "json")
		return err
	}
}

func echoSchema(m *mcpx, _ scenarioContext) error {
	ts, err := m.tools()
	if err != nil {
		return err
	}
	for _, t := range ts {
		if t.Name == "json_schema_2020_12_tool" {
			args := `{"schema":` + string(t.InputSchema) + `}`
			_, err := m.run("call", serverName, "json_schema_echo", args, "-o", "json")
			return err
		}
	}
	return errors.New("json_schema_2020_12_tool is not among the listed tools")
}

// requestState answers each tool's request for input (MRTR): proxyd
// carries the server's request state into the retry, and nothing into an
// unrelated call.
func requestState(m *mcpx, _ scenarioContext) error {
	if _, err := m.tools(); err != nil {
		return err
	}
	answer := filepath.Join(m.dir, "answer.json")
	if err := os.WriteFile(answer, []byte(`{"action":"accept","content":{"confirmed":true}}`), 0o600); err != nil {
		return fmt.Errorf("writing the elicitation answer: %w", err)
	}
	for _, name := range []string{"test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state", "test_mrtr_no_result_type"} {
		if _, err := m.run("call", serverName, name, "{}", "--elicit", "@"+answer, "-o", "json"); err != nil {
			return err
		}
	}
	return nil
}

func everyRequestKind(m *mcpx, sc scenarioContext) error {
	ts, err := m.tools()
	if err != nil {
		return err
	}
	for _, t := range ts {
		if _, err := m.run("call", serverName, t.Name, "{}", "-o", "json"); err != nil {
			return err
		}
	}
	ep, err := m.endpoint()
	if err != nil {
		return err
	}
	return ep.readAndPrompt()
}

// signIn signs in, lists the tools and calls one. mcpx login returns once
// proxyd has reconnected the server with the new token; when the server
// refused it (e.g. 403 insufficient_scope on tools/list) or a call is
// refused (error_class auth), the client signs in again, as a user would:
// proxyd requests the stepped-up scopes and refuses once its step-up
// limit is spent.
func signIn(m *mcpx, _ scenarioContext) error {
	var lastErr error
	for i := 0; i < maxSignIns; i++ {
		m.signedIn = true
		out, err := m.run("login", serverName, "--timeout", "30s", "-o", "json")
		if err != nil {
			var res struct {
				Connection *struct {
					Error string `json:"error"`
				} `json:"connection"`
			}
			if json.Unmarshal([]byte(out), &res) == nil && res.Connection != nil && res.Connection.Error != "" {
				lastErr = err
				continue // signed in, but the server refused the token
			}
			if lastErr != nil {
				return fmt.Errorf("%w (after: %v)", err, lastErr)
			}
			return err
		}
		ts, err := m.tools()
		if err != nil {
			return err
		}
		if len(ts) == 0 {
			return nil // signed in and listed: nothing to call
		}
		out, err = m.run("call", serverName, ts[0].Name, "{}", "-o", "json")
		if err == nil {
			return nil
		}
		var res struct {
			Error *struct {
				ErrorClass string `json:"error_class"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(out), &res) == nil && res.Error != nil && res.Error.ErrorClass == "auth" {
			lastErr = err
			continue
		}
		return err
	}
	return fmt.Errorf("gave up after %d sign-ins: %w", maxSignIns, lastErr)
}

// maxSignIns bounds sign-ins per run: the first, plus scope step-ups.
// proxyd itself refuses after its own limit; this only stops a loop.
const maxSignIns = 6

// withoutNulls leaves out the arguments given as null: mcpx call checks
// arguments against the tool's schema, where null is no boolean or
// string; an argument left out is what a null stands for.
func withoutNulls(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "{}", nil
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(raw, &args); err != nil {
		return "", err
	}
	for k, v := range args {
		if string(v) == "null" {
			delete(args, k)
		}
	}
	b, err := json.Marshal(args)
	return string(b), err
}
