package downstream

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

var validName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

func TestExposedName(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		server, prefix, tool, want string
	}{
		{"docs", "docs__", "search", "docs__search"},
		{"everything", "everything__", "get-sum", "everything__get-sum"},
		{"github", "gh_", "list_issues", "gh_list_issues"},
		{"everything", "", "get-sum", "get-sum"},
		{"everything", "", "test_simple_text", "test_simple_text"},
		{"a", "a__", "with space", ""}, // sanitised, hashed
		{"a", "", "with space", ""},
		{"srv", "srv__", long, ""}, // shortened, hashed
		{"srv", "", long, ""},
		{"srv", "srv__", "ünïcode", ""},
		{"srv", "", "", ""},
	}
	for _, tt := range tests {
		got := ExposedName(tt.server, tt.prefix, tt.tool)
		if tt.want != "" && got != tt.want {
			t.Errorf("ExposedName(%q, %q, %q) = %q, want %q", tt.server, tt.prefix, tt.tool, got, tt.want)
		}
		if !validName.MatchString(got) {
			t.Errorf("ExposedName(%q, %q, %q) = %q breaks the name rules", tt.server, tt.prefix, tt.tool, got)
		}
		if !strings.HasPrefix(got, tt.prefix) {
			t.Errorf("ExposedName(%q, %q, %q) = %q lost its prefix", tt.server, tt.prefix, tt.tool, got)
		}
		if again := ExposedName(tt.server, tt.prefix, tt.tool); again != got {
			t.Errorf("not stable: %q then %q", got, again)
		}
	}
	// Names that end up alike stay apart, also without a prefix.
	for _, prefix := range []string{"a__", ""} {
		if ExposedName("a", prefix, "x y") == ExposedName("a", prefix, "x_y") {
			t.Errorf("prefix %q: two tools that sanitise alike got the same name", prefix)
		}
		if ExposedName("a", prefix, long) == ExposedName("a", prefix, long+"y") {
			t.Errorf("prefix %q: two long tools got the same name", prefix)
		}
	}
	// Names exposed before prefixes existed are kept.
	if got, want := ExposedName("a", "a__", "with space"), "a__with_space-bdc51e"; got != want {
		t.Errorf("default-prefix hashed name changed: %q, want %q", got, want)
	}
}

func TestName(t *testing.T) {
	tools := func(names ...string) []Tool {
		var out []mcp.Tool
		for _, n := range names {
			out = append(out, mcp.NewTool(n))
		}
		return toolsOf(out...)
	}
	ups := []Upstream{
		{Name: "first", Prefix: "", Tools: tools("echo", "add"), Prompts: []mcp.Prompt{mcp.NewPrompt("greet")}},
		{Name: "second", Prefix: "", Tools: tools("echo", "sub"), Prompts: []mcp.Prompt{mcp.NewPrompt("greet"), mcp.NewPrompt("bye")}},
		{Name: "third", Prefix: "third__", Tools: tools("echo")},
	}
	n := Name(ups)
	wantTools := map[string]Entry{
		"echo": {"first", "echo"}, "add": {"first", "add"}, "sub": {"second", "sub"}, "third__echo": {"third", "echo"},
	}
	if !reflect.DeepEqual(n.Tools, wantTools) {
		t.Errorf("tools = %v, want %v", n.Tools, wantTools)
	}
	wantPrompts := map[string]Entry{"greet": {"first", "greet"}, "bye": {"second", "bye"}}
	if !reflect.DeepEqual(n.Prompts, wantPrompts) {
		t.Errorf("prompts = %v, want %v", n.Prompts, wantPrompts)
	}
	want := []Omission{
		{Server: "second", Kind: "tool", Name: "echo", Exposed: "echo", Holder: "first"},
		{Server: "second", Kind: "prompt", Name: "greet", Exposed: "greet", Holder: "first"},
	}
	if !reflect.DeepEqual(n.Omitted, want) {
		t.Errorf("omitted = %+v, want %+v", n.Omitted, want)
	}
	if got := n.OmittedBy("second"); len(got) != 2 || !strings.Contains(got[0], `"echo" is already exposed by server "first"`) {
		t.Errorf("OmittedBy(second) = %q", got)
	}
	if got := n.OmittedBy("first"); len(got) != 0 {
		t.Errorf("the first server lost names: %q", got)
	}
	if name, ok := n.Tool(ups[1], "echo"); ok || name != "echo" {
		t.Errorf("Tool(second, echo) = %q, %v; want echo, false", name, ok)
	}
	if name, ok := n.Tool(ups[2], "echo"); !ok || name != "third__echo" {
		t.Errorf("Tool(third, echo) = %q, %v; want third__echo, true", name, ok)
	}
	// Order decides: the other way round, the other server keeps the name.
	if got := Name([]Upstream{ups[1], ups[0]}).Tools["echo"]; got.Server != "second" {
		t.Errorf("reversed order: echo held by %q, want second", got.Server)
	}
}

func TestOwner(t *testing.T) {
	servers := []Prefixed{{"docs", "docs__"}, {"gh", "gh_"}, {"ghe", "gh_e_"}, {"plain", ""}}
	tests := []struct {
		exposed, server, name string
		ok                    bool
	}{
		{"docs__search", "docs", "search", true},
		{"gh_list", "gh", "list", true},
		{"gh_e_list", "ghe", "list", true}, // the longest prefix
		{"echo", "plain", "echo", true},    // the only server without a prefix
		{"docs__", "plain", "docs__", true},
	}
	for _, tt := range tests {
		server, name, ok := Owner(tt.exposed, servers)
		if server != tt.server || name != tt.name || ok != tt.ok {
			t.Errorf("Owner(%q) = %q, %q, %v; want %q, %q, %v", tt.exposed, server, name, ok, tt.server, tt.name, tt.ok)
		}
	}
	two := []Prefixed{{"a", ""}, {"b", ""}}
	if server, _, ok := Owner("echo", two); ok {
		t.Errorf("two servers without a prefix: Owner guessed %q", server)
	}
}

func TestSessionIDsBounded(t *testing.T) {
	s := newSessionIDs()
	first := s.Generate()
	for i := 0; i < DefaultMaxSessions; i++ {
		id := s.Generate()
		if i%2 == 0 {
			s.Terminate(id)
		}
	}
	if s.get(first) != nil && len(s.live) > DefaultMaxSessions {
		t.Fatal("live sessions are not bounded")
	}
	if len(s.live) > DefaultMaxSessions || len(s.terminated) > maxTerminated {
		t.Fatalf("live %d, terminated %d", len(s.live), len(s.terminated))
	}
	if _, err := s.Validate("not-ours"); err == nil {
		t.Fatal("a foreign id validated")
	}
}

// toolsOf gives tools the facts an upstream connection works out when it
// lists them.
func toolsOf(ts ...mcp.Tool) []Tool {
	out := make([]Tool, 0, len(ts))
	for _, t := range ts {
		b, err := json.Marshal(t)
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(b)
		out = append(out, Tool{Tool: t, Hash: hex.EncodeToString(sum[:8]), ParamHeaders: len(mcp.ExtractParamHeaderBindings(&t)) > 0})
	}
	return out
}
