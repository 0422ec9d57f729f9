package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// buildMcpx compiles the real binary once per benchmark run.
func buildMcpx(b *testing.B, dir string) string {
	b.Helper()
	bin := filepath.Join(dir, "mcpx")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/mcpx-dev/mcpx/cmd/mcpx")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building mcpx: %v\n%s", err, out)
	}
	return bin
}

type daemonProc struct {
	bin, socket string
	cmd         *exec.Cmd
}

func startDaemonProc(b *testing.B, upstream string) *daemonProc {
	b.Helper()
	dir, err := os.MkdirTemp("/tmp", "mcpx-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	bin := buildMcpx(b, dir)
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nservers:\n  - name: fx\n    url: "+upstream+"\n"), 0o600)
	d := &daemonProc{bin: bin, socket: filepath.Join(dir, "s.sock")}
	d.cmd = exec.Command(bin, "--socket", d.socket, "--config", cfg, "--state-dir", filepath.Join(dir, "state"), "proxyd", "--log-level", "warn")
	d.cmd.Stderr = io.Discard
	stop := startTied(b, d.cmd)
	b.Cleanup(func() { stop(os.Interrupt) })
	waitUpstreamReady(b, d.socket)
	return d
}

// rssKB reads VmRSS of a process from /proc.
func rssKB(b *testing.B, pid int) int {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "VmRSS:") {
			n, _ := strconv.Atoi(strings.Fields(sc.Text())[1])
			return n
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// BenchmarkRSS reports proxyd's idle RSS and its RSS after 10% and 100% of
// MCPX_BENCH_RSS_CALLS calls (default 100,000): flat means the activity
// log does not live in memory.
func BenchmarkRSS(b *testing.B) {
	fx, err := mcpserver.Start(mcpserver.Options{Era: mcpserver.EraLegacy})
	if err != nil {
		b.Fatal(err)
	}
	defer fx.Close()
	d := startDaemonProc(b, fx.URL())
	pid := d.cmd.Process.Pid
	idle := rssKB(b, pid)
	st, err := api.NewClient(d.socket, "bench").Status(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	tok, _ := os.ReadFile(filepath.Join(st.StateDir, "proxyd.token"))
	total := envInt("MCPX_BENCH_RSS_CALLS", 100000)
	const clients = 8
	run := func(n int) {
		var wg sync.WaitGroup
		per := n / clients
		for i := 0; i < clients; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tr, _ := transport.NewStreamableHTTP(st.MCPURL, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + strings.TrimSpace(string(tok))}),
					transport.WithHTTPLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
				//lint:ignore SA1019 the legacy era is one of the benchmarked combinations
				cl := client.NewClient(tr, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION), client.WithLegacyProtocolOnly())
				ctx := context.Background()
				if err := cl.Start(ctx); err != nil {
					b.Error(err)
					return
				}
				defer cl.Close()
				if _, err := cl.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
					b.Error(err)
					return
				}
				req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"text": "rss"}}}
				for j := 0; j < per; j++ {
					if _, err := cl.CallTool(ctx, req); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	run(total / 10)
	early := rssKB(b, pid)
	run(total - total/10)
	late := rssKB(b, pid)
	report := fmt.Sprintf("proxyd RSS: idle %.1f MB (target < 40 MB); after %d calls %.1f MB; after %d calls %.1f MB (growth %.1f%%)",
		float64(idle)/1024, total/10, float64(early)/1024, total, float64(late)/1024, 100*float64(late-early)/float64(early))
	fmt.Println(report)
	b.ReportMetric(float64(idle)/1024, "idle-MB")
	b.ReportMetric(float64(late-early)/float64(early), "growth-ratio")
}

// BenchmarkStatusCommand times `mcpx status` from process start to exit
// against a running proxyd, median of 101, next to `true` started the
// same way.
func BenchmarkStatusCommand(b *testing.B) {
	fx, err := mcpserver.Start(mcpserver.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer fx.Close()
	d := startDaemonProc(b, fx.URL())
	// The two commands alternate, so machine noise lands on both alike.
	run := func(args ...string) time.Duration {
		t0 := time.Now()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdout = io.Discard
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	var base, st []time.Duration
	for range 101 {
		base = append(base, run("true"))
		st = append(st, run(d.bin, "--socket", d.socket, "status"))
	}
	slices.Sort(base)
	slices.Sort(st)
	baseline, status := base[len(base)/2], st[len(st)/2]
	fmt.Printf("mcpx status median %s (target < 15ms); process start of 'true' %s\n", status.Round(10*time.Microsecond), baseline.Round(10*time.Microsecond))
	b.ReportMetric(float64(status.Microseconds())/1000, "status-ms")
}
