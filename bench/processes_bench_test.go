package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/internal/tied"
)

// startTied starts cmd so that it dies with the benchmark even when the
// benchmark is killed (see tied), and returns what stops it: a signal,
// then waiting for it to exit.
func startTied(b testing.TB, cmd *exec.Cmd) func(os.Signal) {
	b.Helper()
	exited, err := tied.Start(cmd)
	if err != nil {
		b.Fatal(err)
	}
	return func(sig os.Signal) {
		_ = cmd.Process.Signal(sig)
		<-exited
	}
}

// startProc runs a program and returns the value of its first "key: "
// line on stdout.
func startProc(b testing.TB, key string, name string, args ...string) string {
	b.Helper()
	cmd := exec.Command(name, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = io.Discard
	kill := startTied(b, cmd)
	b.Cleanup(func() { kill(os.Kill) })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), key+": "); ok {
				lines <- v
			}
		}
	}()
	select {
	case v := <-lines:
		return v
	case <-time.After(30 * time.Second):
		b.Fatalf("%s printed no %q line", name, key)
	}
	return ""
}

// buildBinaries builds the project's packages pkgs (paths in the module)
// into a fresh directory, each binary named after its package's last
// element, and returns the directory.
func buildBinaries(tb testing.TB, pkgs ...string) string {
	tb.Helper()
	dir, err := os.MkdirTemp("/tmp", "mcpx-benchp-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	for _, pkg := range pkgs {
		out := filepath.Join(dir, filepath.Base(pkg))
		if o, err := exec.Command("go", "build", "-o", out, "github.com/mcpx-dev/mcpx/"+pkg).CombinedOutput(); err != nil {
			tb.Fatalf("building %s: %v\n%s", pkg, err, o)
		}
	}
	return dir
}

// BenchmarkProxyOverheadProcesses is BenchmarkProxyOverhead with the
// upstream, the reverse proxy and proxyd each in its own process (the real
// binaries), so no path's tail pays for another's garbage collection.
func BenchmarkProxyOverheadProcesses(b *testing.B) {
	dir := buildBinaries(b, "cmd/mcpx", "cmd/mcpx-fixtures", "bench/rproxy")
	var report strings.Builder
	fmt.Fprintf(&report, "\nseparate processes; %s\n", methodNote())
	fmt.Fprint(&report, reportHeader())
	up := startProc(b, "url", filepath.Join(dir, "mcpx-fixtures"), "mcp", "--era", "both", "--direct-echo-from", fmt.Sprint(directEchoFrom))
	// A reverse proxy per era of a cross-era combination (see runCombos).
	rp := startProc(b, "url", filepath.Join(dir, "rproxy"), strings.TrimSuffix(up, "/mcp"))
	rp2 := startProc(b, "url", filepath.Join(dir, "rproxy"), strings.TrimSuffix(up, "/mcp"))
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(benchConfig(up)), 0o600)
	sock := filepath.Join(dir, "s.sock")
	state := filepath.Join(dir, "state")
	pd := exec.Command(filepath.Join(dir, "mcpx"), "--socket", sock, "--config", cfg, "--state-dir", state, "proxyd", "--log-level", "warn")
	pd.Stderr = io.Discard
	stop := startTied(b, pd)
	b.Cleanup(func() { stop(os.Interrupt) })
	pURL := waitUpstreamReady(b, sock)
	tok, _ := os.ReadFile(filepath.Join(state, "proxyd.token"))
	runCombos(b, &report, up, [2]string{rp + "/mcp", rp2 + "/mcp"}, pURL, strings.TrimSpace(string(tok)))
	fmt.Println(report.String())
}
