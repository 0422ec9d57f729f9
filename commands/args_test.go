package commands

import (
	"io"
	"reflect"
	"testing"
)

func TestNormalizeArgs(t *testing.T) {
	app := New(io.Discard, io.Discard)
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"flag after positional", []string{"mcpx", "tools", "alpha", "-o", "json"}, []string{"mcpx", "tools", "-o", "json", "alpha"}},
		{"global after command", []string{"mcpx", "status", "--socket", "S"}, []string{"mcpx", "--socket", "S", "status"}},
		{"global with = after positional", []string{"mcpx", "call", "a", "b", "--socket=S", "x=1"}, []string{"mcpx", "--socket=S", "call", "a", "b", "x=1"}},
		{"call flags mixed", []string{"mcpx", "call", "srv", "echo", "text=hi", "-o", "json", "--timeout", "2s"}, []string{"mcpx", "call", "-o", "json", "--timeout", "2s", "srv", "echo", "text=hi"}},
		{"subcommand flags", []string{"mcpx", "activity", "show", "7", "-o", "yaml"}, []string{"mcpx", "activity", "show", "-o", "yaml", "7"}},
		{"parent flags before subcommand", []string{"mcpx", "servers", "add", "docs", "https://x/mcp", "--header", "A:B"}, []string{"mcpx", "servers", "add", "--header", "A:B", "docs", "https://x/mcp"}},
		{"double dash keeps the rest", []string{"mcpx", "servers", "add", "local", "--env", "A=1", "--", "npx", "-y", "pkg"}, []string{"mcpx", "servers", "add", "--env", "A=1", "local", "npx", "-y", "pkg"}},
		{"bool flag takes no value", []string{"mcpx", "servers", "add", "x", "--disabled", "https://x/mcp"}, []string{"mcpx", "servers", "add", "--disabled", "x", "https://x/mcp"}},
		{"no command", []string{"mcpx", "--socket", "S"}, []string{"mcpx", "--socket", "S"}},
		{"completion marker untouched", []string{"mcpx", "tools", "--generate-bash-completion"}, []string{"mcpx", "tools", "--generate-bash-completion"}},
		{"unknown flag reaches the parser", []string{"mcpx", "tools", "alpha", "--bogus"}, []string{"mcpx", "tools", "--bogus", "alpha"}},
		{"negative number stays positional", []string{"mcpx", "call", "s", "t", "-5"}, []string{"mcpx", "call", "s", "t", "-5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := normalizeArgs(app, tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("normalizeArgs(%q)\n got  %q\n want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	app := New(io.Discard, io.Discard)
	tests := []struct {
		args []string
		want int
	}{
		{[]string{"mcpx", "--socket", "/tmp/mcpx-no-such/s.sock", "status"}, ExitProxydNotRunning},
		{[]string{"mcpx", "--socket", "/tmp/mcpx-no-such/s.sock", "tools", "-o", "xml"}, ExitUsage},
		{[]string{"mcpx", "call"}, ExitUsage},
		{[]string{"mcpx", "call", "srv", "tool", "not-an-argument"}, ExitUsage},
		{[]string{"mcpx", "tools", "--bogus"}, ExitUsage},
		{[]string{"mcpx", "activity", "--fault-domain", "martians"}, ExitUsage},
	}
	for _, tt := range tests {
		err := app.Run(normalizeArgs(app, tt.args))
		if got := ExitCode(err); got != tt.want {
			t.Errorf("%q: exit %d (%v), want %d", tt.args, got, err, tt.want)
		}
	}
}

func TestCallArguments(t *testing.T) {
	tests := []struct {
		pos, flags []string
		want       string
		err        bool
	}{
		{[]string{`{"a": 1}`}, nil, `{"a": 1}`, false},
		{[]string{"a=2", "b=x"}, nil, `{"a":2,"b":"x"}`, false},
		{nil, []string{`q=oauth refresh`, "n=true"}, `{"n":true,"q":"oauth refresh"}`, false},
		{[]string{"obj={\"k\":1}"}, nil, `{"obj":{"k":1}}`, false},
		{[]string{"novalue"}, nil, "", true},
		{[]string{`{"a": 1}`}, []string{"b=2"}, "", true},
		{[]string{`{not json`}, nil, "", true},
		{nil, nil, "", false},
	}
	for _, tt := range tests {
		got, err := callArguments(tt.pos, tt.flags)
		if (err != nil) != tt.err {
			t.Errorf("callArguments(%q, %q) error %v", tt.pos, tt.flags, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("callArguments(%q, %q) = %s, want %s", tt.pos, tt.flags, got, tt.want)
		}
	}
}
