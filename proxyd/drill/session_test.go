package drill

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/proxyd/upstream"
)

func tool(name string, readOnly, destructive bool, schema string) upstream.Tool {
	t := upstream.Tool{Tool: mcp.Tool{Name: name, RawInputSchema: json.RawMessage(schema)}}
	t.Annotations.ReadOnlyHint = &readOnly
	t.Annotations.DestructiveHint = &destructive
	return t
}

func TestFillArgs(t *testing.T) {
	tests := []struct {
		name, schema, want string
		ok                 bool
	}{
		{"no schema", ``, `{}`, true},
		{"no required", `{"type":"object","properties":{"x":{"type":"string"}}}`, `{}`, true},
		{"string", `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`, `{"text":"mcpx drill"}`, true},
		{"numbers", `{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"integer"}},"required":["a","b"]}`, `{"a":1,"b":1}`, true},
		{"enum wins", `{"type":"object","properties":{"k":{"type":"string","enum":["x","y"]}},"required":["k"]}`, `{"k":"x"}`, true},
		{"default", `{"type":"object","properties":{"k":{"type":"array","default":[]}},"required":["k"]}`, `{"k":[]}`, true},
		{"object refused", `{"type":"object","properties":{"o":{"type":"object"}},"required":["o"]}`, ``, false},
		{"undeclared required", `{"type":"object","required":["z"]}`, ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, ok := fillArgs(tool("t", true, false, tt.schema))
			if ok != tt.ok || (ok && string(got) != tt.want) {
				t.Fatalf("fillArgs = %s, %v; want %s, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestPickTools(t *testing.T) {
	obj := `{"type":"object"}`
	tools := []upstream.Tool{
		tool("add", true, false, `{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`),
		tool("get_time", true, false, obj),
		tool("echo", true, false, `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		tool("delete_notes", false, true, obj),
		tool("write_note", false, false, `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		tool("upload", false, false, `{"type":"object","properties":{"blob":{"type":"object"}},"required":["blob"]}`),
	}
	reads, writes := pickTools(tools)
	var names []string
	for _, p := range reads {
		names = append(names, p.name)
	}
	if !slices.Equal(names, []string{"echo", "get_time"}) {
		t.Fatalf("reads %v", names)
	}
	if len(writes) != 1 || writes[0].name != "write_note" {
		t.Fatalf("writes %+v (want the non-destructive write_note)", writes)
	}
}

func TestPlanCalls(t *testing.T) {
	r := []pick{{name: "echo", read: true}, {name: "get_time", read: true}}
	w := []pick{{name: "write_note"}}
	tests := []struct {
		name         string
		n            int
		writes       []pick
		include      bool
		wantR, wantW int
	}{
		{"reads only", 20, w, false, 20, 0},
		{"a quarter writes", 20, w, true, 15, 5},
		{"one call stays a read", 1, w, true, 1, 0},
		{"no write tool", 8, nil, true, 8, 0},
		{"small", 3, w, true, 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := planCalls(tt.n, r, tt.writes, tt.include)
			gotR, gotW := 0, 0
			for _, p := range plan {
				if p.read {
					gotR++
				} else {
					gotW++
				}
			}
			if len(plan) != tt.n || gotR != tt.wantR || gotW != tt.wantW {
				t.Fatalf("plan of %d: %d reads %d writes, want %d/%d", len(plan), gotR, gotW, tt.wantR, tt.wantW)
			}
		})
	}
}
