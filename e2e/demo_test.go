package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDemo runs 'make demo's script on the binaries under test: every
// step must exit as documented and it must touch nothing outside its temp
// dir (HOME and XDG dirs point into the test's own).
func TestDemo(t *testing.T) {
	e := newEnv(t)
	bin := filepath.Join(e.dir, "bin")
	if err := os.MkdirAll(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"mcpx": mcpxBin, "mcpx-fixtures": fixturesBin, "mcpx-browser": conformanceAdapter(t)} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../tools/demo.sh")
	cmd.Env = append(e.environ(), "MCPX_DEMO_BINDIR="+bin)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("make demo's script took %s", time.Since(start).Round(time.Millisecond))
	if err != nil || !strings.Contains(string(out), "demo passed") {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for _, want := range []string{"verdict: PASS", "verdict:       PASS", "Signed in to secure.", "sha256:", "(exit 15, as documented)", "tool_error\tupstream"} { // tables off a terminal are TSV
		if !strings.Contains(string(out), want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
	// Nothing left behind in the user's places.
	for _, d := range []string{"home", "xdg-config", "xdg-state", "xdg-runtime"} {
		if entries, _ := os.ReadDir(filepath.Join(e.dir, d)); len(entries) > 0 {
			t.Errorf("the demo wrote into %s: %v", d, entries)
		}
	}
}
