package editdistance

import "testing"

func TestClosest(t *testing.T) {
	known := []string{"echo", "add", "output", "everything", "fixture"}
	tests := []struct{ word, want string }{
		{"ech", "echo"},
		{"outptu", "output"},
		{"evrything", "everything"},
		{"FIXTURE", "fixture"},
		{"echo", ""}, // an exact match needs no hint
		{"zz", ""},
		{"a", ""},
		{"xyzzyplugh", ""},
	}
	for _, tt := range tests {
		if got := Closest(tt.word, known); got != tt.want {
			t.Errorf("Closest(%q) = %q, want %q", tt.word, got, tt.want)
		}
	}
	if got := DidYouMean("ech", known); got != ` (did you mean "echo"?)` {
		t.Errorf("DidYouMean = %q", got)
	}
}
