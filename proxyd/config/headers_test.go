package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHeaderReferences(t *testing.T) {
	t.Setenv("MCPX_TEST_PAT", "pat-canary-123")
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte("file-canary-456\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse("config.yaml", []byte("servers:\n  - name: gh\n    url: https://x.test/mcp\n    headers:\n      Authorization: Bearer ${env:MCPX_TEST_PAT}\n      X-API-Key: ${file:"+file+"}\n      X-Team: blue\n"))
	if err != nil {
		t.Fatalf("references are allowed: %v", err)
	}
	s, _ := cfg.Server("gh")
	got, err := s.ResolvedHeaders()
	if err != nil {
		t.Fatal(err)
	}
	if got["Authorization"] != "Bearer pat-canary-123" || got["X-API-Key"] != "file-canary-456" || got["X-Team"] != "blue" {
		t.Errorf("resolved %v", got)
	}
	if s.Headers["Authorization"] != "Bearer ${env:MCPX_TEST_PAT}" {
		t.Errorf("the configured value changed: %q", s.Headers["Authorization"])
	}
	os.Unsetenv("MCPX_TEST_PAT")
	if _, err := s.ResolvedHeaders(); err == nil {
		t.Error("an unset variable resolved")
	}
}

func TestSecretLookingHeaderWarns(t *testing.T) {
	cfg, err := Parse("config.yaml", []byte("servers:\n  - name: a\n    url: https://x.test/mcp\n    headers:\n      X-Api-Key: abc123\n      X-Team: blue\n"))
	if err != nil {
		t.Fatal(err)
	}
	ws := cfg.Warnings()
	if len(ws) != 1 || !strings.Contains(ws[0].Error(), "X-Api-Key looks like a credential") {
		t.Errorf("warnings %v", ws)
	}
}
