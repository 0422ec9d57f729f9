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
// proxyd speaks with the upstream. The fixture speaks both, so a direct
// or reverse-proxy path speaks the era of the client that takes it: in a
// cross-era combination both are measured with a client in each era.
type combo struct {
	client, upstream string
}

func (c combo) cross() bool { return c.client != c.upstream }

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

// proxydPrefix is the prefix of the exposed tools of the server for
// upstream era.
func proxydPrefix(upstream string) string {
	if upstream == "legacy" {
		return "fxl__"
	}
	return "fxm__"
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
	// legacy: the path's client speaks the legacy era (else the modern).
	legacy bool
	// progress: call the fixture's progress tool with a progressToken (one
	// notification, an SSE answer) instead of echo.
	progress bool
}

// dial opens an initialised MCP client session on p.
func dial(b *testing.B, p path) *client.Client {
	b.Helper()
	ctx := context.Background()
	tr, err := transport.NewStreamableHTTP(p.url, transport.WithHTTPHeaders(p.headers),
		transport.WithHTTPLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		b.Fatal(err)
	}
	var opts []client.ClientOption
	if p.legacy {
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
func latencies(b *testing.B, paths []path, clients, calls int) [][]time.Duration {
	b.Helper()
	lat := make([][]time.Duration, len(paths))
	for i := range lat {
		lat[i] = make([]time.Duration, calls)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		cls := make([]*client.Client, len(paths))
		for i, p := range paths {
			cls[i] = dial(b, p)
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
func blocks(b *testing.B, paths []path, clients, calls, rounds int) [][]time.Duration {
	b.Helper()
	cls := make([][]*client.Client, clients)
	for i := range cls {
		cls[i] = make([]*client.Client, len(paths))
		for k, p := range paths {
			cls[i][k] = dial(b, p)
		}
	}
	lat := make([][]time.Duration, len(paths))
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
func throughput(b *testing.B, p path, clients, calls int) float64 {
	b.Helper()
	cls := make([]*client.Client, clients)
	for i := range cls {
		cls[i] = dial(b, p)
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
	return fmt.Sprintf("%-14s %-3s %-10s %10s %10s %10s %10s %9s %11s %11s %11s %11s %6s\n", "client/up", "c", "path",
		"p50", "p99", "blk p50", "blk p99", "calls/s", "added p50", "added p99", "blk +p50", "blk +p99", "tput")
}

// ratios are proxyd's figures over the reverse proxy's: added latency at
// p50 and p99 by each method, and throughput.
type ratios struct{ p50, p99, blockP50, blockP99, tput float64 }

// verdict is one comparison's ratios: against the direct call and the
// reverse proxy in the client's era, and (cross-era combinations only)
// in the upstream's era, where the call proxyd makes is the one the
// direct and reverse-proxy clients make.
type verdict struct {
	client, upstream ratios
	cross            bool
}

// judged are the ratios the targets apply to: the upstream era's when the
// eras differ (proxyd pays the upstream's era on its side, which the
// client's-era baselines do not), else the client's.
func (v verdict) judged() ratios {
	if v.cross {
		return v.upstream
	}
	return v.client
}

// addedRatio is proxyd's added latency over the reverse proxy's, each
// over the direct call d (0 with "n/a" when the reverse proxy added
// nothing measurable: a ratio would be noise).
func addedRatio(d, rp, pd time.Duration) (float64, string) {
	if rp-d <= 0 {
		return 0, "n/a"
	}
	r := float64(pd-d) / float64(rp-d)
	return r, fmt.Sprintf("%.2fx", r)
}

func pct(lat []time.Duration, q int) time.Duration { return lat[len(lat)*q/100] }

// The paths of a comparison, by index: the direct call, the reverse proxy
// and proxyd with the client's era, then (cross-era combinations) the
// direct call and the reverse proxy with the upstream's era.
const (
	pDirect = iota
	pRproxy
	pProxyd
	pDirectUp
	pRproxyUp
)

// compare measures the paths at one concurrency by both methods, appends
// their rows and the verdict lines to report, and returns proxyd's ratios
// to the reverse proxy.
func compare(b *testing.B, report *strings.Builder, label string, clients int, paths []path) verdict {
	b.Helper()
	for i := range paths {
		paths[i].failed = &atomic.Int64{}
	}
	lat := latencies(b, paths, clients, reps*callsPerRun)
	blk := blocks(b, paths, clients, blockCalls, blockRounds)
	runs := make([][]float64, len(paths))
	for range reps {
		for i, p := range paths {
			runs[i] = append(runs[i], throughput(b, p, clients, callsPerRun/2))
		}
	}
	n := len(paths)
	p50, p99, b50, b99 := make([]time.Duration, n), make([]time.Duration, n), make([]time.Duration, n), make([]time.Duration, n)
	perSec := make([]float64, n)
	for i := range paths {
		p50[i], p99[i] = pct(lat[i], 50), pct(lat[i], 99)
		b50[i], b99[i] = pct(blk[i], 50), pct(blk[i], 99)
		slices.Sort(runs[i])
		perSec[i] = runs[i][len(runs[i])/2]
	}
	us := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	// row prints path i with its latency added over direct path d and its
	// throughput relative to d's.
	row := func(name string, i, d int) {
		fmt.Fprintf(report, "%-14s %-3d %-10s %10s %10s %10s %10s %9.0f %11s %11s %11s %11s %5.0f%%\n", label, clients, name,
			us(p50[i]), us(p99[i]), us(b50[i]), us(b99[i]), perSec[i],
			us(p50[i]-p50[d]), us(p99[i]-p99[d]), us(b50[i]-b50[d]), us(b99[i]-b99[d]), 100*perSec[i]/perSec[d])
	}
	cross := n > pDirectUp
	row(paths[pDirect].name, pDirect, pDirect)
	row(paths[pRproxy].name, pRproxy, pDirect)
	row(paths[pProxyd].name, pProxyd, pDirect)
	if cross {
		row(paths[pDirectUp].name, pDirectUp, pDirectUp)
		row(paths[pRproxyUp].name, pRproxyUp, pDirectUp)
		row("proxyd/up", pProxyd, pDirectUp)
	}
	for i, p := range paths {
		total := 2*reps*callsPerRun + blockRounds*blockCalls + 20*clients*n
		if n := p.failed.Load(); n > 0 {
			fmt.Fprintf(report, "  (%s: %d of about %d calls failed)\n", p.name, n, total)
			if n*100 > int64(total) {
				b.Errorf("%s %s: %d of about %d calls failed", label, paths[i].name, n, total)
			}
		}
	}
	side := func(era string, d, rp int) ratios {
		var r ratios
		var s [4]string
		r.p50, s[0] = addedRatio(p50[d], p50[rp], p50[pProxyd])
		r.p99, s[1] = addedRatio(p99[d], p99[rp], p99[pProxyd])
		r.blockP50, s[2] = addedRatio(b50[d], b50[rp], b50[pProxyd])
		r.blockP99, s[3] = addedRatio(b99[d], b99[rp], b99[pProxyd])
		r.tput = perSec[pProxyd] / perSec[rp]
		fmt.Fprintf(report, "  => %s era: proxyd added latency vs reverse proxy: paired p50 %s p99 %s, blocks p50 %s p99 %s; throughput %.0f%% of reverse proxy\n",
			era, s[0], s[1], s[2], s[3], 100*r.tput)
		fmt.Fprintf(report, "SUMMARY %s c%d %s %.3f %.3f %.3f %.3f %.3f\n", label, clients, era, r.p50, r.p99, r.blockP50, r.blockP99, r.tput)
		return r
	}
	v := verdict{cross: cross}
	v.client = side("client", pDirect, pRproxy)
	if cross {
		v.upstream = side("upstream", pDirectUp, pRproxyUp)
	}
	fmt.Fprintf(report, "  (targets, on the %s era's baselines: added p50 and p99 <= 1.25x by both methods; throughput >= 90%% at 16 clients)\n",
		map[bool]string{false: "client", true: "upstream"}[cross])
	return v
}

// reportRatios records the ratios as benchmark metrics: the ones the
// targets apply to, and in a cross-era combination the client era's too.
func reportRatios(b *testing.B, label string, clients int, v verdict) {
	metrics := func(suffix string, r ratios) {
		b.ReportMetric(r.p50, fmt.Sprintf("%s-c%d-p50-ratio%s", label, clients, suffix))
		b.ReportMetric(r.p99, fmt.Sprintf("%s-c%d-p99-ratio%s", label, clients, suffix))
		b.ReportMetric(r.blockP50, fmt.Sprintf("%s-c%d-block-p50-ratio%s", label, clients, suffix))
		b.ReportMetric(r.blockP99, fmt.Sprintf("%s-c%d-block-p99-ratio%s", label, clients, suffix))
		b.ReportMetric(r.tput, fmt.Sprintf("%s-c%d-tput-ratio%s", label, clients, suffix))
	}
	metrics("", v.judged())
	if v.cross {
		metrics("-client-era", v.client)
	}
}

// comboPaths are the paths compared in combination cb: tool on the
// fixture directly and through the reverse proxy, with a client in the
// client's era and (cross-era) in the upstream's, and through proxyd.
func comboPaths(cb combo, upstream, rproxy, proxydURL string, auth map[string]string, tool string, progress bool) []path {
	legacy := cb.client == "legacy"
	era := map[bool]string{true: "L", false: "M"}
	ps := []path{
		{name: "direct/" + era[legacy], url: upstream, tool: tool, legacy: legacy, progress: progress},
		{name: "rproxy/" + era[legacy], url: rproxy, tool: tool, legacy: legacy, progress: progress},
		{name: "proxyd", url: proxydURL, headers: auth, tool: proxydPrefix(cb.upstream) + tool, legacy: legacy, progress: progress},
	}
	if cb.cross() {
		ps = append(ps,
			path{name: "direct/" + era[!legacy], url: upstream, tool: tool, legacy: !legacy, progress: progress},
			path{name: "rproxy/" + era[!legacy], url: rproxy, tool: tool, legacy: !legacy, progress: progress})
	}
	return ps
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
		paths := comboPaths(cb, upstream, rproxy, proxydURL, auth, "echo", false)
		for _, c := range []int{1, 16} {
			if !selected("MCPX_BENCH_CLIENTS", fmt.Sprint(c)) {
				continue
			}
			reportRatios(b, strings.ReplaceAll(cb.String(), "/", "-"), c, compare(b, report, cb.String(), c, paths))
		}
	}
	if !selected("MCPX_BENCH_CLIENTS", "1") || !selected("MCPX_BENCH_PROGRESS", "1") {
		return
	}
	fmt.Fprintf(report, "calls with a progressToken (the fixture's progress tool, one notification: an SSE answer):\n")
	for _, cb := range combos {
		if !selected("MCPX_BENCH_COMBOS", cb.String()) {
			continue
		}
		paths := comboPaths(cb, upstream, rproxy, proxydURL, auth, "progress", true)
		label := strings.ReplaceAll(cb.String(), "/", "-") + "-progress"
		reportRatios(b, label, 1, compare(b, report, cb.String()+"+p", 1, paths))
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
