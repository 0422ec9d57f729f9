package secretref

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SECRETREF_TEST", "env-secret")
	tests := []struct {
		in, want, err string
	}{
		{"plain", "plain", ""},
		{"${env:SECRETREF_TEST}", "env-secret", ""},
		{"postgres://u:${file:" + pw + "}@h/db", "postgres://u:file-secret@h/db", ""},
		{"${env:SECRETREF_TEST}-${file:" + pw + "}", "env-secret-file-secret", ""},
		{"${env:SECRETREF_UNSET_X}", "", "SECRETREF_UNSET_X is not set"},
		{"${file:" + filepath.Join(dir, "none") + "}", "", "no such file"},
		{"${env:}", "", "names nothing"},
		{"${vault:x}", "", "unknown reference"},
	}
	for _, tt := range tests {
		got, err := Expand(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Expand(%q) error %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Expand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if Strip("a${env:X}b") != "ab" || !Has("${file:/x}") || Has("plain") {
		t.Error("Strip/Has")
	}
}

func TestExpandFromDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tok"), []byte("value-from-dir\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ExpandFrom("Bearer ${file:tok}", dir); err != nil || got != "Bearer value-from-dir" {
		t.Fatalf("relative to dir: %q, %v", got, err)
	}
	if got, err := ExpandFrom("${file:"+filepath.Join(dir, "tok")+"}", "/elsewhere"); err != nil || got != "value-from-dir" {
		t.Fatalf("absolute path ignores dir: %q, %v", got, err)
	}
}
