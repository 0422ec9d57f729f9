package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/api"
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
	fmt.Fprintf(&report, "\nseparate processes, %d calls per measurement, medians of %d\n", callsPerRun, reps)
	fmt.Fprintf(&report, "%-7s %-3s %-9s %10s %10s %10s %12s %12s\n", "era", "c", "path", "p50", "p99", "calls/s", "added p50", "added p99")
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
		cl := api.NewClient(sock, "bench")
		var pURL string
		for deadline := time.Now().Add(30 * time.Second); ; {
			st, err := cl.Status(context.Background())
			if err == nil && len(st.Servers) == 1 && st.Servers[0].State == api.StateReady {
				pURL = st.MCPURL
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("proxyd not ready: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		tok, _ := os.ReadFile(filepath.Join(state, "proxyd.token"))
		auth := map[string]string{"Authorization": "Bearer " + strings.TrimSpace(string(tok))}
		legacy := era == "legacy"
		for _, c := range []int{1, 16} {
			var ds, bs, ps []stats
			for rep := 0; rep < reps; rep++ {
				ds = append(ds, measure(b, up, nil, "echo", legacy, c))
				bs = append(bs, measure(b, rp+"/mcp", nil, "echo", legacy, c))
				ps = append(ps, measure(b, pURL, auth, "fx__echo", legacy, c))
			}
			direct, bare, px := median(ds), median(bs), median(ps)
			for _, row := range []struct {
				name string
				s    stats
			}{{"direct", direct}, {"rproxy", bare}, {"proxyd", px}} {
				fmt.Fprintf(&report, "%-7s %-3d %-9s %10s %10s %10.0f %12s %12s\n", era, c, row.name,
					row.s.p50.Round(time.Microsecond), row.s.p99.Round(time.Microsecond), row.s.perSec,
					(row.s.p50 - direct.p50).Round(time.Microsecond), (row.s.p99 - direct.p99).Round(time.Microsecond))
			}
			ratio := func(a, b time.Duration) string {
				if b <= 0 {
					return "n/a"
				}
				return fmt.Sprintf("%.2fx", float64(a)/float64(b))
			}
			fmt.Fprintf(&report, "  => added latency vs reverse proxy: p50 %s, p99 %s (target <= 1.25x); throughput %.0f%% of reverse proxy (target >= 90%% at 16 clients)\n",
				ratio(px.p50-direct.p50, bare.p50-direct.p50), ratio(px.p99-direct.p99, bare.p99-direct.p99), 100*px.perSec/bare.perSec)
		}
		_ = pd.Process.Signal(os.Interrupt)
		_ = pd.Wait()
	}
	fmt.Println(report.String())
}
