package commands

import (
	"strings"
	"testing"
	"time"
)

func TestFitCause(t *testing.T) {
	dns := "failed to connect: transport error: failed to send request: failed to send request: Post \"http://x.invalid/mcp\": dial tcp: lookup x.invalid: no such host"
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"short", 60, "short"},
		{"a: a: b", 60, "a: b"},
		{dns, 60, "…dial tcp: lookup x.invalid: no such host"},
		{dns, 36, "…lookup x.invalid: no such host"},
		{"one very long sentence without any colon in it at all", 20, "one very long…"},
	}
	for _, tt := range tests {
		got := fitCause(tt.in, tt.max)
		if got != tt.want {
			t.Errorf("fitCause(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
		if len(got) > tt.max+len("…") {
			t.Errorf("fitCause(%q, %d) is %d bytes long", tt.in, tt.max, len(got))
		}
	}
	if got := dedupeChain(dns); strings.Count(got, "failed to send request") != 1 {
		t.Errorf("dedupeChain kept a repeated link: %q", got)
	}
}

func TestMachineJSON(t *testing.T) {
	type rec struct {
		ID   int            `json:"id"`
		When time.Time      `json:"when"`
		M    map[string]int `json:"m,omitempty"`
	}
	loc := time.FixedZone("X", 3600)
	got, err := machineJSON([]rec{{ID: 1, When: time.Date(2026, 1, 2, 15, 4, 5, 0, loc)}, {ID: 2}})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"schema_version":1,"id":1,"when":"2026-01-02T14:04:05Z"},{"schema_version":1,"id":2,"when":"0001-01-01T00:00:00Z"}]`
	if string(got) != want {
		t.Errorf("machineJSON = %s\nwant          %s", got, want)
	}
	if got := string(withSchemaVersion([]byte(`{}`))); got != `{"schema_version":1}` {
		t.Errorf("empty object: %s", got)
	}
}
