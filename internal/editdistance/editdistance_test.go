package editdistance

import "testing"

func TestLevenshtein(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"url", "url", 0},
		{"urll", "url", 1},
		{"hedaers", "headers", 2},
		{"upstrem", "upstream", 1},
		{"", "abc", 3},
	}
	for _, tt := range tests {
		if got := Levenshtein(tt.a, tt.b); got != tt.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
