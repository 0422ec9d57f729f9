package commands

import (
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
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
		{[]string{"x=2", "y=x"}, nil, `{"x":2,"y":"x"}`, false},
		{nil, []string{`q=oauth refresh`, "t=true"}, `{"q":"oauth refresh","t":true}`, false},
		{[]string{"obj={\"k\":1}"}, nil, `{"obj":{"k":1}}`, false},
		{[]string{"novalue"}, nil, "", true},
		{[]string{`{"a": 1}`}, []string{"b=2"}, "", true},
		{[]string{`{not json`}, nil, "", true},
		{nil, nil, "", false},
		// Typed by the schema: a string property keeps "123" a string.
		{[]string{"s=123", "n=7", "i=8", "b=true", "u=9"}, nil, `{"b":true,"i":8,"n":7,"s":"123","u":9}`, false},
		{[]string{"s=null", "n=abc"}, nil, `{"n":"abc","s":"null"}`, false},
		{[]string{"o={\"k\":1}", "a=[1]"}, nil, `{"a":[1],"o":{"k":1}}`, false},
		{[]string{"o=[1]"}, nil, `{"o":"[1]"}`, false},
		{[]string{"a=1", "a=2"}, nil, "", true},
		{[]string{"a=1"}, []string{"a=2"}, "", true},
		{[]string{"-"}, nil, `{"from":"stdin"}`, false},
		{[]string{"@testdata/args.json"}, nil, `{"from": "file"}`, false},
		{[]string{"@testdata/missing.json"}, nil, "", true},
		{[]string{"@testdata/args.json", "a=1"}, nil, "", true},
		{[]string{"a=1", "-"}, nil, "", true},
	}
	props := func() map[string][]string {
		return schemaTypes(json.RawMessage(`{"type":"object","properties":{"s":{"type":"string"},"n":{"type":"number"},"i":{"type":"integer"},"b":{"type":"boolean"},"o":{"type":"object"},"a":{"type":["array","null"]}}}`))
	}
	for _, tt := range tests {
		got, err := parseArguments(tt.pos, tt.flags, props, strings.NewReader(`{"from":"stdin"}`))
		if err != nil && ExitCode(err) != ExitUsage {
			t.Errorf("%q: exit %d, want usage", tt.pos, ExitCode(err))
		}
		if (err != nil) != tt.err {
			t.Errorf("callArguments(%q, %q) error %v", tt.pos, tt.flags, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("callArguments(%q, %q) = %s, want %s", tt.pos, tt.flags, got, tt.want)
		}
	}
}

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{"", time.Time{}, false},
		{"1h", now.Add(-time.Hour), false},
		{"90s", now.Add(-90 * time.Second), false},
		{"7d", now.Add(-7 * 24 * time.Hour), false},
		{"2026-11-29T08:00:00Z", time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC), false},
		{"2026-11-29T08:00:00.5+01:00", time.Date(2026, 11, 29, 7, 0, 0, 500_000_000, time.UTC), false},
		{"2026-11-29", time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC), false},
		{"-1h", time.Time{}, true},
		{"+10m", now.Add(10 * time.Minute), false},
		{"2026-11-29T08:00:00", time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC), false},
		{"2026-11-29 08:00:00 +01:00", time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC), false},
		{"2026-11-29 08:00", time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC), false},
		{"yesterday", time.Time{}, true},
		{"1.5d", time.Time{}, true},
	}
	for _, tt := range tests {
		got, err := parseWhen(tt.in, now)
		if (err != nil) != tt.wantErr || !got.Equal(tt.want) {
			t.Errorf("parseWhen(%q) = %v, %v; want %v (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestOpenSchema(t *testing.T) {
	tests := []struct {
		schema string
		open   bool
	}{
		{`{"type":"object","properties":{"a":{}}}`, false},
		{`{"type":"object","properties":{"a":{}},"additionalProperties":false}`, false},
		{`{"type":"object","properties":{"a":{}},"additionalProperties":true}`, true},
		{`{"type":"object","properties":{"a":{}},"additionalProperties":{"type":"string"}}`, true},
		{`not json`, true},
	}
	for _, tt := range tests {
		if got := openSchema(json.RawMessage(tt.schema)); got != tt.open {
			t.Errorf("openSchema(%s) = %v, want %v", tt.schema, got, tt.open)
		}
	}
	// A property without a type is listed, of any type.
	if types := schemaTypes(json.RawMessage(`{"properties":{"e":{"enum":["x"]}}}`)); len(types) != 1 {
		t.Errorf("a property without a type is not listed: %v", types)
	}
}
