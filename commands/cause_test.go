package commands

import (
	"strings"
	"testing"
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
