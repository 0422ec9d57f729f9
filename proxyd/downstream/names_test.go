package downstream

import (
	"regexp"
	"strings"
	"testing"
)

var validName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

func TestExposedName(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		server, tool, want string
	}{
		{"docs", "search", "docs__search"},
		{"everything", "get-sum", "everything__get-sum"},
		{"a", "with space", ""}, // sanitised, hashed
		{"srv", long, ""},       // shortened, hashed
		{"srv", "ünïcode", ""},
	}
	for _, tt := range tests {
		got := ExposedName(tt.server, tt.tool)
		if tt.want != "" && got != tt.want {
			t.Errorf("ExposedName(%q, %q) = %q, want %q", tt.server, tt.tool, got, tt.want)
		}
		if !validName.MatchString(got) {
			t.Errorf("ExposedName(%q, %q) = %q breaks the name rules", tt.server, tt.tool, got)
		}
		if !strings.HasPrefix(got, tt.server+Separator) {
			t.Errorf("ExposedName(%q, %q) = %q lost its server prefix", tt.server, tt.tool, got)
		}
		if again := ExposedName(tt.server, tt.tool); again != got {
			t.Errorf("not stable: %q then %q", got, again)
		}
	}
	if ExposedName("a", "x y") == ExposedName("a", "x_y") {
		t.Error("two tools that sanitise alike got the same name")
	}
	if ExposedName("s", long) == ExposedName("s", long+"y") {
		t.Error("two long tools got the same name")
	}
}

func TestSessionIDsBounded(t *testing.T) {
	s := newSessionIDs()
	first := s.Generate()
	for i := 0; i < maxLive; i++ {
		id := s.Generate()
		if i%2 == 0 {
			s.Terminate(id)
		}
	}
	if s.get(first) != nil && len(s.live) > maxLive {
		t.Fatal("live sessions are not bounded")
	}
	if len(s.live) > maxLive || len(s.terminated) > maxTerminated {
		t.Fatalf("live %d, terminated %d", len(s.live), len(s.terminated))
	}
	if _, err := s.Validate("not-ours"); err == nil {
		t.Fatal("a foreign id validated")
	}
}
