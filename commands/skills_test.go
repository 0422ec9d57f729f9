package commands

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestVerifySkill(t *testing.T) {
	body := []byte("---\nname: pdf-processing\ndescription: Extract PDFs\n---\n\nSkill body.\n")
	sum := sha256.Sum256(body)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	size := int64(len(body))
	wrongSize := size + 1
	entry := skill{URI: "skill://pdf/SKILL.md", Frontmatter: map[string]any{"name": "pdf-processing", "description": "Extract PDFs"}}
	tests := []struct {
		name    string
		file    skillFile
		body    []byte
		entry   skill
		wantErr string
	}{
		{"verified", skillFile{URI: entry.URI, Digest: digest, Size: &size}, body, entry, ""},
		{"digest", skillFile{URI: entry.URI, Digest: "sha256:00", Size: &size}, body, entry, "does not match its entry's digest"},
		{"size", skillFile{URI: entry.URI, Digest: digest, Size: &wrongSize}, body, entry, "size mismatch"},
		{"no digest", skillFile{URI: entry.URI}, body, entry, "no digest"},
		{"frontmatter differs", skillFile{URI: entry.URI, Digest: digest}, body,
			skill{URI: entry.URI, Frontmatter: map[string]any{"name": "pdf-processing", "description": "Other"}}, `field "description" differs`},
		{"frontmatter has more", skillFile{URI: entry.URI, Digest: digest}, body,
			skill{URI: entry.URI, Frontmatter: map[string]any{"name": "pdf-processing"}}, `field "description" the skill's entry does not`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := verifySkillFile(tt.file, tt.body)
			if err == nil {
				err = checkFrontmatter(tt.entry, tt.body)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
