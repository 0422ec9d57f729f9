package probe

import (
	"strings"
	"testing"
)

func TestClean(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"a\x1b[31mred\x1b[0m", "ared"},
		{"line\u2028separator", "line separator"},
		{"line1\nline2\tx", "line1 line2 x"},
		{"bell\x07 del\x7f c1\u009b", "bell del c1"},
		{"bidi\u202eevil", "bidievil"},
	}
	for _, tt := range tests {
		if got := clean(tt.in); got != tt.want {
			t.Errorf("clean(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRedactorForms(t *testing.T) {
	u, _ := parseTarget("https://alice:s3cr3t-pass@mcp.example.test/mcp?token=tok/en+1")
	r := newRedactor(Options{
		Headers:     map[string]string{"Authorization": "Bearer hdr-secret-1", "X-Key": "key with space"},
		BearerToken: "stored-token-2",
	}, u)
	in := strings.Join([]string{
		"Bearer hdr-secret-1", "hdr-secret-1", "key with space", "key+with+space", "key%20with%20space",
		"stored-token-2", "s3cr3t-pass", "alice", "tok/en+1", "tok%2Fen%2B1",
	}, " | ")
	out := r.String(in)
	for _, s := range []string{"hdr-secret-1", "key with space", "key+with+space", "stored-token-2", "s3cr3t-pass", "alice", "tok/en+1", "tok%2Fen%2B1"} {
		if strings.Contains(out, s) {
			t.Errorf("%q survived redaction: %s", s, out)
		}
	}
	v := r.value(map[string]any{"nested": []any{"x stored-token-2 y", map[string]string{"k": "alice"}}})
	if s := strings.Join(flatten(v), " "); strings.Contains(s, "stored-token-2") || strings.Contains(s, "alice") {
		t.Errorf("value redaction missed: %s", s)
	}
}

func flatten(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case map[string]any:
		var out []string
		for k, x := range t {
			out = append(out, k)
			out = append(out, flatten(x)...)
		}
		return out
	case []any:
		var out []string
		for _, x := range t {
			out = append(out, flatten(x)...)
		}
		return out
	}
	return nil
}
