package commands

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestCompletionsUpToDate fails when completions/ no longer matches what
// 'mcpx completion SHELL' prints: run 'make completions' and commit.
func TestCompletionsUpToDate(t *testing.T) {
	files := map[string]string{"bash": "mcpx.bash", "zsh": "_mcpx", "fish": "mcpx.fish"}
	for shell, file := range files {
		var out bytes.Buffer
		app := New(&out, io.Discard)
		if err := app.Run([]string{"mcpx", "completion", shell}); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("..", "completions", file))
		if err != nil {
			t.Fatalf("%s: %v (run 'make completions')", file, err)
		}
		if !bytes.Equal(got, out.Bytes()) {
			t.Errorf("completions/%s is stale: run 'make completions' and commit it", file)
		}
	}
}

func TestCompletionUnknownShell(t *testing.T) {
	app := New(io.Discard, io.Discard)
	err := app.Run([]string{"mcpx", "completion", "tcsh"})
	if ExitCode(err) != ExitUsage {
		t.Fatalf("exit %d, want %d", ExitCode(err), ExitUsage)
	}
}
