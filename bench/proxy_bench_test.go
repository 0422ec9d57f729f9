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

// callsPerRun and reps size a measurement: paired latency is taken over
// reps*callsPerRun paired calls per path, throughput as the median of reps
// interleaved runs of callsPerRun/2 calls per path; block latency over
// blockRounds rounds of one block of blockCalls calls per path.
var (
	callsPerRun = envInt("MCPX_BENCH_CALLS", 3000)
	reps        = envInt("MCPX_BENCH_REPS", 3)
	blockCalls  = envInt("MCPX_BENCH_BLOCK", 2000)
	blockRounds = 2
)

// combo is one combination of protocol eras: the client's, and the one
// proxyd speaks with the upstream (the fixture speaks both, so the direct
// and reverse-proxy paths always speak the client's era).
type combo struct {
	client, upstream string
}

func (c combo) String() string { return c.client + "/" + c.upstream }

// combos are the four era combinations; legacy client with a modern
// upstream is the common deployment (clients lag servers).
var combos = []combo{{"legacy", "legacy"}, {"legacy", "modern"}, {"modern", "legacy"}, {"modern", "modern"}}

// benchConfig is proxyd's config for the benchmarks: the fixture twice,
// pinned to each era, so one proxyd serves every combination.
func benchConfig(upstream string) string {
	return "listen: 127.0.0.1:0\nservers:\n" +
		"  - name: fxl\n    url: " + upstream + "\n    protocol: legacy\n" +
		"  - name: fxm\n    url: " + upstream + "\n    protocol: modern\n"
}

// proxydTool is the exposed echo tool of the server for upstream era.
func proxydTool(upstream string) string {
	if upstream == "legacy" {
		return "fxl__echo"
	}
	return "fxm__echo"
}

// selected reports whether value is in the comma-separated list in the
// environment variable name (unset: everything is selected), to run a
// part of the benchmark while working on it.
func selected(name, value string) bool {
	v := os.Getenv(name)
	return v == "" || slices.Contains(strings.Split(v, ","), value)
}

func envInt(name string, def int) int {
	var n int
	if _, err := fmt.Sscan(os.Getenv(name), &n); err == nil && n > 0 {
		return n
	}
	return def
}

// path is one way to reach the upstream's echo tool.
type path struct {
	// failed counts failed calls (see call).
	failed *atomic.Int64

	name    string
	url     string
	headers map[string]string
	tool    string
	// progress: call the fixture's progress tool with a progressToken (one
	// notification, an SSE answer) instead of echo.
	progress bool
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
		p.call(b, cl)
	}
	return cl
}

// call calls the path's tool once. A failure is counted, not fatal: the
// library's server now and then ends an SSE answer without the response
// (a race in its stream writer), on any path; compare fails the run when
// more than 1% of a path's calls fail.
func (p path) call(b *testing.B, cl *client.Client) bool {
	req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: p.tool, Arguments: map[string]any{"text": "benchmark payload"}}}
	if p.progress {
		req.Params.Meta = &mcp.Meta{ProgressToken: "bench"}
	}
	res, err := cl.CallTool(context.Background(), req)
	if err != nil || res.IsError {
		if p.failed.Add(1) == 1 {
			b.Logf("call of %s on %s: %v", p.tool, p.name, err)
		}
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
					if !paths[i].call(b, cls[i]) {
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

// blocks times calls per path in warm sequential blocks: all clients call
// one path for a block of `calls` calls, then the next path, the paths
// alternating block by block (and the order rotating each round).
func blocks(b *testing.B, paths [3]path, legacy bool, clients, calls, rounds int) [3][]time.Duration {
	b.Helper()
	cls := make([][3]*client.Client, clients)
	for i := range cls {
		for k, p := range paths {
			cls[i][k] = dial(b, p, legacy)
		}
	}
	var lat [3][]time.Duration
	for r := range rounds {
		for k := range paths {
			i := (k + r) % len(paths)
			got := make([]time.Duration, calls)
			var next atomic.Int64
			var wg sync.WaitGroup
			for w := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						n := int(next.Add(1) - 1)
						if n >= calls {
							return
						}
						t0 := time.Now()
						if !paths[i].call(b, cls[w][i]) {
							return
						}
						got[n] = time.Since(t0)
					}
				}()
			}
			wg.Wait()
			lat[i] = append(lat[i], got...)
		}
	}
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
			for next.Add(1) <= int64(calls) && p.call(b, cl) {
			}
		}()
	}
	wg.Wait()
	return float64(calls) / time.Since(start).Seconds()
}

func methodNote() string {
	return fmt.Sprintf("paired: %d paired calls per path; blocks: %d rounds of a %d-call block per path, paths alternating; calls/s: median of %d interleaved runs of %d calls",
		reps*callsPerRun, blockRounds, blockCalls, reps, callsPerRun/2)
}

func reportHeader() string {
	return fmt.Sprintf("%-14s %-3s %-7s %10s %10s %10s %10s %9s %11s %11s %11s %11s %6s\n", "client/up", "c", "path",
		"p50", "p99", "blk p50", "blk p99", "calls/s", "added p50", "added p99", "blk +p50", "blk +p99", "tput")
}

// ratios are proxyd's figures over the reverse proxy's: added latency at
// p50 and p99 by each method, and throughput.
type ratios struct{ p50, p99, blockP50, blockP99, tput float64 }

// addedRatio is proxyd's added latency over the reverse proxy's (0 with
// "n/a" when the reverse proxy added nothing measurable: a ratio would be
// noise).
func addedRatio(p [3]time.Duration) (float64, string) {
	if p[1]-p[0] <= 0 {
		return 0, "n/a"
	}
	r := float64(p[2]-p[0]) / float64(p[1]-p[0])
	return r, fmt.Sprintf("%.2fx", r)
}

func pct(lat []time.Duration, q int) time.Duration { return lat[len(lat)*q/100] }

// compare measures the three paths at one concurrency by both methods,
// appends their rows and the verdict line to report, and returns proxyd's
// ratios to the reverse proxy.
func compare(b *testing.B, report *strings.Builder, label string, legacy bool, clients int, paths [3]path) ratios {
	b.Helper()
	for i := range paths {
		paths[i].failed = &atomic.Int64{}
	}
	lat := latencies(b, paths, legacy, clients, reps*callsPerRun)
	blk := blocks(b, paths, legacy, clients, blockCalls, blockRounds)
	var runs [3][]float64
	for range reps {
		for i, p := range paths {
			runs[i] = append(runs[i], throughput(b, p, legacy, clients, callsPerRun/2))
		}
	}
	var p50, p99, b50, b99 [3]time.Duration
	var perSec [3]float64
	for i := range paths {
		p50[i], p99[i] = pct(lat[i], 50), pct(lat[i], 99)
		b50[i], b99[i] = pct(blk[i], 50), pct(blk[i], 99)
		slices.Sort(runs[i])
		perSec[i] = runs[i][len(runs[i])/2]
		us := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
		fmt.Fprintf(report, "%-14s %-3d %-7s %10s %10s %10s %10s %9.0f %11s %11s %11s %11s %5.0f%%\n", label, clients, paths[i].name,
			us(p50[i]), us(p99[i]), us(b50[i]), us(b99[i]), perSec[i],
			us(p50[i]-p50[0]), us(p99[i]-p99[0]), us(b50[i]-b50[0]), us(b99[i]-b99[0]), 100*perSec[i]/perSec[0])
	}
	for i, p := range paths {
		total := 2*reps*callsPerRun + blockRounds*blockCalls + 20*clients*3
		if n := p.failed.Load(); n > 0 {
			fmt.Fprintf(report, "  (%s: %d of about %d calls failed)\n", p.name, n, total)
			if n*100 > int64(total) {
				b.Errorf("%s %s: %d of about %d calls failed", label, paths[i].name, n, total)
			}
		}
	}
	var r ratios
	var s [4]string
	r.p50, s[0] = addedRatio(p50)
	r.p99, s[1] = addedRatio(p99)
	r.blockP50, s[2] = addedRatio(b50)
	r.blockP99, s[3] = addedRatio(b99)
	r.tput = perSec[2] / perSec[1]
	fmt.Fprintf(report, "  => proxyd added latency vs reverse proxy: paired p50 %s p99 %s, blocks p50 %s p99 %s (target <= 1.25x); throughput %.0f%% of reverse proxy (target >= 90%% at 16 clients)\n",
		s[0], s[1], s[2], s[3], 100*r.tput)
	return r
}

// reportRatios records the ratios as benchmark metrics.
func reportRatios(b *testing.B, label string, clients int, r ratios) {
	b.ReportMetric(r.p50, fmt.Sprintf("%s-c%d-p50-ratio", label, clients))
	b.ReportMetric(r.p99, fmt.Sprintf("%s-c%d-p99-ratio", label, clients))
	b.ReportMetric(r.blockP50, fmt.Sprintf("%s-c%d-block-p50-ratio", label, clients))
	b.ReportMetric(r.blockP99, fmt.Sprintf("%s-c%d-block-p99-ratio", label, clients))
	b.ReportMetric(r.tput, fmt.Sprintf("%s-c%d-tput-ratio", label, clients))
}

// runCombos measures every era combination at 1 and 16 clients against
// the fixture at upstream, the reverse proxy at rproxy and proxyd at
// proxydURL, then a call with a progressToken (an SSE answer) per
// combination at 1 client.
func runCombos(b *testing.B, report *strings.Builder, upstream, rproxy, proxydURL, token string) {
	auth := map[string]string{"Authorization": "Bearer " + token}
	for _, cb := range combos {
		if !selected("MCPX_BENCH_COMBOS", cb.String()) {
			continue
		}
		legacy := cb.client == "legacy"
		paths := [3]path{
			{name: "direct", url: upstream, tool: "echo"},
			{name: "rproxy", url: rproxy, tool: "echo"},
			{name: "proxyd", url: proxydURL, headers: auth, tool: proxydTool(cb.upstream)},
		}
		for _, c := range []int{1, 16} {
			if !selected("MCPX_BENCH_CLIENTS", fmt.Sprint(c)) {
				continue
			}
			reportRatios(b, strings.ReplaceAll(cb.String(), "/", "-"), c, compare(b, report, cb.String(), legacy, c, paths))
		}
	}
	if !selected("MCPX_BENCH_CLIENTS", "1") {
		return
	}
	fmt.Fprintf(report, "calls with a progressToken (the fixture's progress tool, one notification: an SSE answer):\n")
	for _, cb := range combos {
		if !selected("MCPX_BENCH_COMBOS", cb.String()) {
			continue
		}
		legacy := cb.client == "legacy"
		prefix := strings.TrimSuffix(proxydTool(cb.upstream), "echo")
		paths := [3]path{
			{name: "direct", url: upstream, tool: "progress", progress: true},
			{name: "rproxy", url: rproxy, tool: "progress", progress: true},
			{name: "proxyd", url: proxydURL, headers: auth, tool: prefix + "progress", progress: true},
		}
		label := strings.ReplaceAll(cb.String(), "/", "-") + "-progress"
		reportRatios(b, label, 1, compare(b, report, cb.String()+"+p", legacy, 1, paths))
	}
}

func startProxyd(b *testing.B, upstream string) (url, token string, stop func()) {
	b.Helper()
	dir, err := os.MkdirTemp("/tmp", "mcpx-bench-")
	if err != nil {
		b.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(benchConfig(upstream)), 0o600)
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

// waitUpstreamReady waits until the proxyd on sock answers with all its
// upstreams ready, and returns its MCP endpoint URL.
func waitUpstreamReady(b *testing.B, sock string) string {
	b.Helper()
	cl := api.NewClient(sock, "bench")
	var url string
	waitfor.Cond(b, 30*time.Second, "proxyd and its upstream to be ready", func() (bool, string) {
		st, err := cl.Status(context.Background())
		if err != nil {
			return false, err.Error()
		}
		for _, s := range st.Servers {
			if s.State != api.StateReady {
				return false, fmt.Sprintf("%+v", st.Servers)
			}
		}
		url = st.MCPURL
		return true, ""
	})
	return url
}

// BenchmarkProxyOverhead compares, in one run, a tools/call made directly
// to a loopback upstream, through a bare httputil.ReverseProxy (the floor
// for one extra hop) and through proxyd, in every combination of client
// and upstream era, at 1 and 16 concurrent clients, and prints the ratios.
func BenchmarkProxyOverhead(b *testing.B) {
	var report strings.Builder
	fmt.Fprintf(&report, "\nin one process; %s\n", methodNote())
	fmt.Fprint(&report, reportHeader())
	fx, err := mcpserver.Start(mcpserver.Options{Era: mcpserver.EraBoth})
	if err != nil {
		b.Fatal(err)
	}
	defer fx.Close()
	target, _ := url.Parse(strings.TrimSuffix(fx.URL(), "/mcp"))
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64}
	rpSrv := httptest.NewServer(rp)
	defer rpSrv.Close()
	pURL, token, stop := startProxyd(b, fx.URL())
	defer stop()
	runCombos(b, &report, fx.URL(), rpSrv.URL+"/mcp", pURL, token)
	fmt.Println(report.String())
}
