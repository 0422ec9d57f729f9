package config

import (
	"reflect"
	"testing"
)

func TestListEntries(t *testing.T) {
	tests := []struct {
		name, text, key string
		want            []Entry
	}{
		{"block list", "# servers\nservers:\n  - name: docs\n    url: https://docs.example/mcp\n\n  - name: \"search\"\n    command: [srv]\n", "servers",
			[]Entry{{Line: 3, Column: 3, Name: "docs"}, {Line: 6, Column: 3, Name: "search"}}},
		{"unindented list, no names", "targets:\n- url: https://a.example/mcp\n- server: docs\n", "targets",
			[]Entry{{Line: 2, Column: 1}, {Line: 3, Column: 1}}},
		{"flow list", "servers: [{name: a, url: 'https://a.example'}]\n", "servers",
			[]Entry{{Line: 1, Column: 11, Name: "a"}}},
		{"no such key", "servers: []\n", "targets", nil},
		{"not a list", "targets: {a: 1}\n", "targets", nil},
		{"not YAML", "targets: [\n", "targets", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ListEntries([]byte(tt.text), tt.key)
			if len(got) == 0 && len(tt.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
