package commands

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPrintToolResultContent(t *testing.T) {
	wav := []byte("RIFF....WAVEfmt ")
	png := []byte("\x89PNG\r\n\x1a\n")
	size := int64(2048)
	res, _ := json.Marshal(map[string]any{"content": []any{
		map[string]any{"type": "text", "text": "hello"},
		map[string]any{"type": "image", "mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(png)},
		map[string]any{"type": "audio", "mimeType": "audio/wav", "data": base64.StdEncoding.EncodeToString(wav)},
		map[string]any{"type": "resource_link", "uri": "file:///tmp/report.pdf", "name": "report.pdf", "mimeType": "application/pdf", "size": size, "description": "the report"},
		map[string]any{"type": "resource", "resource": map[string]any{"uri": "file:///../../etc/x.bin", "mimeType": "application/octet-stream", "blob": base64.StdEncoding.EncodeToString([]byte{1, 2, 3})}},
	}})
	dir := t.TempDir()
	var out bytes.Buffer
	if err := printToolResult(&out, res, dir); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"hello", "[image] image/png, 8 bytes, saved to", "[audio] audio/wav, 16 bytes, saved to",
		"[resource_link] report.pdf  file:///tmp/report.pdf  (application/pdf, 2.0 KiB)", "  the report", "[resource] file:///../../etc/x.bin application/octet-stream, 3 bytes, saved to"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	files, _ := os.ReadDir(dir)
	if len(files) != 3 {
		t.Fatalf("saved %d files, want 3", len(files))
	}
	for _, f := range files {
		if strings.Contains(f.Name(), "..") || strings.ContainsRune(f.Name(), filepath.Separator) {
			t.Errorf("unsafe file name %q", f.Name())
		}
	}
	got, _ := os.ReadFile(filepath.Join(dir, files[0].Name()))
	if len(got) == 0 {
		t.Errorf("%s is empty", files[0].Name())
	}
	// Without --save, the binary is described and not written.
	out.Reset()
	_ = printToolResult(&out, res, "")
	if !strings.Contains(out.String(), "--save DIR writes it to a file") {
		t.Errorf("no --save hint:\n%s", out.String())
	}
}
