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
)

// startProc runs a program and returns the value of its first "key: "
// line on stdout.
func startProc(b *testing.B, key string, name string, args ...string) string {
	b.Helper()
	cmd := exec.Command(name, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
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

// BenchmarkProxyOverheadProcesses is BenchmarkProxyOverhead with the
// upstream, the reverse proxy and proxyd each in its own process (the real
// binaries), so no path's tail pays for another's garbage collection.
func BenchmarkProxyOverheadProcesses(b *testing.B) {
	dir, err := os.MkdirTemp("/tmp", "mcpx-benchp-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	for _, pkg := range []string{"cmd/mcpx", "cmd/mcpx-fixtures", "bench/rproxy"} {
		out := filepath.Join(dir, filepath.Base(pkg))
		if o, err := exec.Command("go", "build", "-o", out, "github.com/mcpx-dev/mcpx/"+pkg).CombinedOutput(); err != nil {
			b.Fatalf("building %s: %v\n%s", pkg, err, o)
		}
	}
	var report strings.Builder
	fmt.Fprintf(&report, "\nseparate processes; %s\n", methodNote())
	fmt.Fprint(&report, reportHeader())
	for _, era := range []string{"legacy", "modern"} {
		up := startProc(b, "url", filepath.Join(dir, "mcpx-fixtures"), "mcp", "--era", era)
		rp := startProc(b, "url", filepath.Join(dir, "rproxy"), strings.TrimSuffix(up, "/mcp"))
		cfg := filepath.Join(dir, era+".yaml")
		os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nservers:\n  - name: fx\n    url: "+up+"\n"), 0o600)
		sock := filepath.Join(dir, era+".sock")
		state := filepath.Join(dir, era+"-state")
		pd := exec.Command(filepath.Join(dir, "mcpx"), "--socket", sock, "--config", cfg, "--state-dir", state, "proxyd", "--log-level", "warn")
		pd.Stderr = io.Discard
		if err := pd.Start(); err != nil {
			b.Fatal(err)
		}
		pURL := waitUpstreamReady(b, sock)
		tok, _ := os.ReadFile(filepath.Join(state, "proxyd.token"))
		auth := map[string]string{"Authorization": "Bearer " + strings.TrimSpace(string(tok))}
		paths := [3]path{
			{"direct", up, nil, "echo"},
			{"rproxy", rp + "/mcp", nil, "echo"},
			{"proxyd", pURL, auth, "fx__echo"},
		}
		for _, c := range []int{1, 16} {
			r := compare(b, &report, era, c, paths)
			b.ReportMetric(r.p50, fmt.Sprintf("%s-c%d-added-p50-ratio", era, c))
			b.ReportMetric(r.p99, fmt.Sprintf("%s-c%d-added-p99-ratio", era, c))
			b.ReportMetric(r.tput, fmt.Sprintf("%s-c%d-tput-ratio", era, c))
		}
		_ = pd.Process.Signal(os.Interrupt)
		_ = pd.Wait()
	}
	fmt.Println(report.String())
}
