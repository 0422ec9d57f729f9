package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/proxyd"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// callsPerRun and reps size a measurement: latency is taken over
// reps*callsPerRun paired calls per path, throughput as the median of reps
// interleaved runs of callsPerRun/2 calls per path.
var (
	callsPerRun = envInt("MCPX_BENCH_CALLS", 5000)
	reps        = envInt("MCPX_BENCH_REPS", 3)
)

func envInt(name string, def int) int {
	var n int
	if _, err := fmt.Sscan(os.Getenv(name), &n); err == nil && n > 0 {
		return n
	}
	return def
}

// path is one way to reach the upstream's echo tool.
type path struct {
	name    string
	url     string
	headers map[string]string
	tool    string
}

// dial opens an initialised MCP client session on p.
func dial(b *testing.B, p path, legacy bool) *client.Client {
	b.Helper()
	ctx := context.Background()
	tr, err := transport.NewStreamableHTTP(p.url, transport.WithHTTPHeaders(p.headers),
		transport.WithHTTPLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		b.Fatal(err)
	}
	var opts []client.ClientOption
	if legacy {
		//lint:ignore SA1019 the legacy era is one of the benchmarked combinations
		opts = append(opts, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION), client.WithLegacyProtocolOnly())
	}
	cl := client.NewClient(tr, opts...)
	if err := cl.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := cl.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "bench", Version: "1"}}}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cl.Close() })
	// Warm the connection and caches.
	for range 20 {
		if !echoCall(b, cl, p.tool) {
			b.FailNow()
		}
	}
	return cl
}

// echoCall calls tool once; a failure is reported and ends the caller's
// loop (it may run on a worker goroutine, where Fatal is not allowed).
func echoCall(b *testing.B, cl *client.Client, tool string) bool {
	req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "benchmark payload"}}}
	res, err := cl.CallTool(context.Background(), req)
	if err != nil || res.IsError {
		b.Errorf("call of %s: %v", tool, err)
		return false
	}
	return true
}

// latencies times calls per path over `clients` workers that each call
// every path in turn, starting from a different one each round: the
// samples are paired, so a moment of machine noise lands on all paths
// alike instead of on whichever path was being measured.
func latencies(b *testing.B, paths [3]path, legacy bool, clients, calls int) [3][]time.Duration {
	b.Helper()
	var lat [3][]time.Duration
	for i := range lat {
		lat[i] = make([]time.Duration, calls)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		var cls [3]*client.Client
		for i, p := range paths {
			cls[i] = dial(b, p, legacy)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := int(next.Add(1) - 1)
				if n >= calls {
					return
				}
				for k := range paths {
					i := (n + k) % len(paths)
					t0 := time.Now()
					if !echoCall(b, cls[i], paths[i].tool) {
						return
					}
					lat[i][n] = time.Since(t0)
				}
			}
		}()
	}
	wg.Wait()
	for i := range lat {
		slices.Sort(lat[i])
	}
	return lat
}

// throughput makes `calls` calls of one path over `clients` workers and
// returns calls per second.
func throughput(b *testing.B, p path, legacy bool, clients, calls int) float64 {
	b.Helper()
	cls := make([]*client.Client, clients)
	for i := range cls {
		cls[i] = dial(b, p, legacy)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for _, cl := range cls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(calls) && echoCall(b, cl, p.tool) {
			}
		}()
	}
	wg.Wait()
	return float64(calls) / time.Since(start).Seconds()
}

func methodNote() string {
	return fmt.Sprintf("latency: %d paired calls per path; calls/s: median of %d interleaved runs of %d calls", reps*callsPerRun, reps, callsPerRun/2)
}

func reportHeader() string {
	return fmt.Sprintf("%-7s %-3s %-7s %10s %10s %10s %12s %12s %9s\n", "era", "c", "path", "p50", "p99", "calls/s", "added p50", "added p99", "tput")
}

type ratios struct{ p50, p99, tput float64 }

// compare measures the three paths at one concurrency, appends their rows
// and the verdict line to report, and returns proxyd's ratios to the
// reverse proxy: added latency at p50 and p99, and throughput.
func compare(b *testing.B, report *strings.Builder, era string, clients int, paths [3]path) ratios {
	b.Helper()
	legacy := era == "legacy"
	lat := latencies(b, paths, legacy, clients, reps*callsPerRun)
	var runs [3][]float64
	for range reps {
		for i, p := range paths {
			runs[i] = append(runs[i], throughput(b, p, legacy, clients, callsPerRun/2))
		}
	}
	var p50, p99 [3]time.Duration
	var perSec [3]float64
	for i := range paths {
		p50[i], p99[i] = lat[i][len(lat[i])/2], lat[i][len(lat[i])*99/100]
		slices.Sort(runs[i])
		perSec[i] = runs[i][len(runs[i])/2]
		fmt.Fprintf(report, "%-7s %-3d %-7s %10s %10s %10.0f %12s %12s %8.0f%%\n", era, clients, paths[i].name,
			p50[i].Round(time.Microsecond), p99[i].Round(time.Microsecond), perSec[i],
			(p50[i] - p50[0]).Round(time.Microsecond), (p99[i] - p99[0]).Round(time.Microsecond), 100*perSec[i]/perSec[0])
	}
	ratio := func(p [3]time.Duration) (float64, string) {
		if p[1]-p[0] <= 0 {
			// The reverse proxy added nothing measurable: a ratio would
			// be noise.
			return 0, "n/a"
		}
		r := float64(p[2]-p[0]) / float64(p[1]-p[0])
		return r, fmt.Sprintf("%.2fx", r)
	}
	var r ratios
	var p50s, p99s string
	r.p50, p50s = ratio(p50)
	r.p99, p99s = ratio(p99)
	r.tput = perSec[2] / perSec[1]
	fmt.Fprintf(report, "  => proxyd added latency vs reverse proxy: p50 %s, p99 %s (target <= 1.25x); throughput %.0f%% of reverse proxy (target >= 90%% at 16 clients)\n", p50s, p99s, 100*r.tput)
	return r
}

func startProxyd(b *testing.B, upstream string) (url, token string, stop func()) {
	b.Helper()
	dir, err := os.MkdirTemp("/tmp", "mcpx-bench-")
	if err != nil {
		b.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nservers:\n  - name: fx\n    url: "+upstream+"\n"), 0o600)
	ready := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	sock := filepath.Join(dir, "s.sock")
	go func() {
		done <- proxyd.Run(ctx, proxyd.Options{Socket: sock, StateDir: filepath.Join(dir, "state"), ConfigPath: cfg,
			Version: "bench", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Ready: ready})
	}()
	select {
	case <-ready:
	case err := <-done:
		b.Fatal(err)
	}
	url = waitUpstreamReady(b, sock)
	tok, _ := os.ReadFile(filepath.Join(dir, "state", proxyd.TokenFile))
	return url, strings.TrimSpace(string(tok)), func() { cancel(); <-done; os.RemoveAll(dir) }
}

// waitUpstreamReady waits until the proxyd on sock answers with its one
// upstream ready, and returns its MCP endpoint URL.
func waitUpstreamReady(b *testing.B, sock string) string {
	b.Helper()
	cl := api.NewClient(sock, "bench")
	var url string
	waitfor.Cond(b, 30*time.Second, "proxyd and its upstream to be ready", func() (bool, string) {
		st, err := cl.Status(context.Background())
		if err != nil {
			return false, err.Error()
		}
		if len(st.Servers) != 1 || st.Servers[0].State != api.StateReady {
			return false, fmt.Sprintf("%+v", st.Servers)
		}
		url = st.MCPURL
		return true, ""
	})
	return url
}

// BenchmarkProxyOverhead compares, in one run, a tools/call made directly
// to a loopback upstream, through a bare httputil.ReverseProxy (the floor
// for one extra hop) and through proxyd, per protocol era, at 1 and 16
// concurrent clients, and prints the ratios.
func BenchmarkProxyOverhead(b *testing.B) {
	var report strings.Builder
	fmt.Fprintf(&report, "\nin one process; %s\n", methodNote())
	fmt.Fprint(&report, reportHeader())
	for _, era := range []mcpserver.Era{mcpserver.EraLegacy, mcpserver.EraModern} {
		fx, err := mcpserver.Start(mcpserver.Options{Era: era})
		if err != nil {
			b.Fatal(err)
		}
		target, _ := url.Parse(strings.TrimSuffix(fx.URL(), "/mcp"))
		rp := httputil.NewSingleHostReverseProxy(target)
		rp.FlushInterval = -1
		rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64}
		rpSrv := httptest.NewServer(rp)
		pURL, token, stop := startProxyd(b, fx.URL())
		paths := [3]path{
			{"direct", fx.URL(), nil, "echo"},
			{"rproxy", rpSrv.URL + "/mcp", nil, "echo"},
			{"proxyd", pURL, map[string]string{"Authorization": "Bearer " + token}, "fx__echo"},
		}
		for _, c := range []int{1, 16} {
			r := compare(b, &report, string(era), c, paths)
			b.ReportMetric(r.p50, fmt.Sprintf("%s-c%d-added-p50-ratio", era, c))
			b.ReportMetric(r.p99, fmt.Sprintf("%s-c%d-added-p99-ratio", era, c))
			b.ReportMetric(r.tput, fmt.Sprintf("%s-c%d-tput-ratio", era, c))
		}
		stop()
		rpSrv.Close()
		fx.Close()
	}
	fmt.Println(report.String())
}
