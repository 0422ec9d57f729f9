package secretref

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	const secret = "canary-secretref-77"
	if err := os.WriteFile(filepath.Join(dir, "tok"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "empty"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, MaxFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SECRETREF_TEST", secret)
	t.Setenv("SECRETREF_EMPTY", "")
	tests := []struct {
		in, want string
		err      bool
	}{
		{"plain value", "plain value", false},
		{"${env:SECRETREF_TEST}", secret, false},
		{"Bearer ${env:SECRETREF_TEST}", "Bearer " + secret, false},
		{"${file:tok}", secret, false},
		{"${file:" + filepath.Join(dir, "tok") + "}", secret, false},
		{"${env:SECRETREF_UNSET_X}", "", true},
		{"${env:SECRETREF_EMPTY}", "", true},
		{"${env:not a name}", "", true},
		{"${file:missing}", "", true},
		{"${file:empty}", "", true},
		{"${file:big}", "", true},
		{"${file:}", "", true},
		{"${vault:x}", "", true},
	}
	for _, tt := range tests {
		got, err := Resolve(tt.in, dir)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.err)
		}
		if err != nil {
			if !errors.Is(err, ErrUnresolved) {
				t.Errorf("%q: error does not wrap ErrUnresolved: %v", tt.in, err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%q: error shows the secret: %v", tt.in, err)
			}
		}
	}
	if !Has("x ${env:A}") || Has("${nope}") {
		t.Error("Has")
	}
}
