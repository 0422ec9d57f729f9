package downstream

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// A publish leaves the library serving exactly the upstreams' tools,
// whichever way the lists moved since the last one: a server gone and
// back, a tool changed in place, a name changing holder, nothing at all.
func TestPublishFollowsTheLists(t *testing.T) {
	a := Upstream{Name: "a", Prefix: "", Tools: toolsOf(mcp.NewTool("echo", mcp.WithDescription("a's echo")), mcp.NewTool("add"))}
	b := Upstream{Name: "b", Prefix: "", Tools: toolsOf(mcp.NewTool("echo", mcp.WithDescription("b's echo")), mcp.NewTool("sub"))}
	aChanged := a
	aChanged.Tools = toolsOf(mcp.NewTool("echo", mcp.WithDescription("a's new echo")), mcp.NewTool("add"))
	steps := []struct {
		name string
		ups  []Upstream
		want []string // exposed name: description
	}{
		{"first publish", []Upstream{a, b}, []string{"add: ", "echo: a's echo", "sub: "}},
		{"nothing changed", []Upstream{a, b}, []string{"add: ", "echo: a's echo", "sub: "}},
		{"b gone", []Upstream{a}, []string{"add: ", "echo: a's echo"}},
		{"b back", []Upstream{a, b}, []string{"add: ", "echo: a's echo", "sub: "}},
		{"a gone: b's echo takes the name", []Upstream{b}, []string{"echo: b's echo", "sub: "}},
		{"a back first: the name goes back", []Upstream{a, b}, []string{"add: ", "echo: a's echo", "sub: "}},
		{"a's echo changed", []Upstream{aChanged, b}, []string{"add: ", "echo: a's new echo", "sub: "}},
		{"a's echo changed and b gone", []Upstream{a}, []string{"add: ", "echo: a's echo"}},
		{"none", nil, nil},
	}
	be := &stepBackend{}
	s := New(be, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, st := range steps {
		be.ups = st.ups
		s.Sync()
		var got []string
		for name, tool := range s.mcp.ListTools() {
			got = append(got, name+": "+tool.Tool.Description)
		}
		slices.Sort(got)
		if !slices.Equal(got, st.want) {
			t.Fatalf("%s: the library serves %q, want %q", st.name, got, st.want)
		}
		for _, name := range []string{"echo", "add", "sub"} {
			if r, ok := s.table.Load().tools[name]; ok && s.mcp.GetTool(name) == nil {
				t.Fatalf("%s: %s routes to %s but is not served", st.name, name, r.server)
			} else if !ok && s.mcp.GetTool(name) != nil {
				t.Fatalf("%s: %s is served without a route", st.name, name)
			}
		}
	}
}

type stepBackend struct {
	listBackend
	ups []Upstream
}

func (b *stepBackend) Upstreams() []Upstream { return b.ups }
