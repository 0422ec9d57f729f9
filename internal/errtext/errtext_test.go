package errtext

import "testing"

func TestDedupe(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a: b", "a: b"},
		{"failed to send request: failed to send request: EOF", "failed to send request: EOF"},
		{"x: Y: y: z", "x: Y: z"},
		{"body:\nline: line", "body:\nline: line"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Dedupe(tt.in); got != tt.want {
			t.Errorf("Dedupe(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
