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
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// callsPerRun is how many tool calls one measurement makes; reps how many
// interleaved measurements of each path the medians are taken over.
var (
	callsPerRun = envInt("MCPX_BENCH_CALLS", 5000)
	reps        = envInt("MCPX_BENCH_REPS", 3)
)

// median takes each statistic's median over repetitions.
func median(ss []stats) stats {
	pick := func(f func(stats) float64) float64 {
		v := make([]float64, len(ss))
		for i, s := range ss {
			v[i] = f(s)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	return stats{
		p50:    time.Duration(pick(func(s stats) float64 { return float64(s.p50) })),
		p99:    time.Duration(pick(func(s stats) float64 { return float64(s.p99) })),
		perSec: pick(func(s stats) float64 { return s.perSec }),
	}
}

func envInt(name string, def int) int {
	var n int
	if _, err := fmt.Sscan(os.Getenv(name), &n); err == nil && n > 0 {
		return n
	}
	return def
}

type stats struct {
	p50, p99 time.Duration
	perSec   float64
}

// measure makes callsPerRun calls of echo over `clients` concurrent MCP
// sessions and returns latency percentiles and throughput.
func measure(b *testing.B, url string, headers map[string]string, tool string, legacy bool, clients int) stats {
	b.Helper()
	ctx := context.Background()
	cls := make([]*client.Client, clients)
	for i := range cls {
		tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(headers),
			transport.WithHTTPLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			b.Fatal(err)
		}
		var opts []client.ClientOption
		if legacy {
			opts = append(opts, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION), client.WithLegacyProtocolOnly())
		}
		cl := client.NewClient(tr, opts...)
		if err := cl.Start(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := cl.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "bench", Version: "1"}}}); err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		cls[i] = cl
	}
	req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "benchmark payload"}}}
	// Warm connections and caches.
	for _, cl := range cls {
		for i := 0; i < 20; i++ {
			if _, err := cl.CallTool(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	}
	lat := make([]time.Duration, callsPerRun)
	var next int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for _, cl := range cls {
		wg.Add(1)
		go func(cl *client.Client) {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if int(i) >= callsPerRun {
					return
				}
				t0 := time.Now()
				res, err := cl.CallTool(ctx, req)
				if err != nil || res.IsError {
					b.Errorf("call: %v", err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}(cl)
	}
	wg.Wait()
	elapsed := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return stats{p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], perSec: float64(callsPerRun) / elapsed.Seconds()}
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
	cl := api.NewClient(sock, "bench")
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := cl.Status(context.Background())
		if err == nil && len(st.Servers) == 1 && st.Servers[0].State == api.StateReady {
			url = st.MCPURL
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("upstream never ready: %v %+v", err, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	tok, _ := os.ReadFile(filepath.Join(dir, "state", proxyd.TokenFile))
	return url, strings.TrimSpace(string(tok)), func() { cancel(); <-done; os.RemoveAll(dir) }
}

// BenchmarkProxyOverhead compares, in one run, a tools/call made directly
// to a loopback upstream, through a bare httputil.ReverseProxy (the floor
// for one extra hop) and through proxyd, per protocol era, at 1 and 16
// concurrent clients, and prints the ratios.
func BenchmarkProxyOverhead(b *testing.B) {
	var report strings.Builder
	fmt.Fprintf(&report, "\n%d calls per measurement\n", callsPerRun)
	fmt.Fprintf(&report, "%-7s %-3s %-9s %10s %10s %10s %12s %12s %10s\n", "era", "c", "path", "p50", "p99", "calls/s", "added p50", "added p99", "tput")
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
		legacy := era == mcpserver.EraLegacy
		for _, c := range []int{1, 16} {
			// Interleaved repetitions, medians taken: the three paths see
			// the same machine conditions.
			var ds, bs, ps []stats
			for rep := 0; rep < reps; rep++ {
				ds = append(ds, measure(b, fx.URL(), nil, "echo", legacy, c))
				bs = append(bs, measure(b, rpSrv.URL+"/mcp", nil, "echo", legacy, c))
				ps = append(ps, measure(b, pURL, map[string]string{"Authorization": "Bearer " + token}, "fx__echo", legacy, c))
			}
			direct, bare, px := median(ds), median(bs), median(ps)
			row := func(name string, s stats) {
				addP50, addP99 := s.p50-direct.p50, s.p99-direct.p99
				fmt.Fprintf(&report, "%-7s %-3d %-9s %10s %10s %10.0f %12s %12s %9.0f%%\n", era, c, name,
					s.p50.Round(time.Microsecond), s.p99.Round(time.Microsecond), s.perSec,
					addP50.Round(time.Microsecond), addP99.Round(time.Microsecond), 100*s.perSec/direct.perSec)
			}
			row("direct", direct)
			row("rproxy", bare)
			row("proxyd", px)
			ratio := func(a, b time.Duration) (float64, string) {
				if b <= 0 {
					// The reverse proxy added nothing measurable: a ratio
					// would be noise.
					return 0, "n/a"
				}
				r := float64(a) / float64(b)
				return r, fmt.Sprintf("%.2fx", r)
			}
			p50r, p50s := ratio(px.p50-direct.p50, bare.p50-direct.p50)
			p99r, p99s := ratio(px.p99-direct.p99, bare.p99-direct.p99)
			tput := px.perSec / bare.perSec
			fmt.Fprintf(&report, "  => proxyd added latency vs reverse proxy: p50 %s, p99 %s (target <= 1.25x); throughput %.0f%% of reverse proxy (target >= 90%% at 16 clients)\n", p50s, p99s, 100*tput)
			b.ReportMetric(p50r, fmt.Sprintf("%s-c%d-added-p50-ratio", era, c))
			b.ReportMetric(p99r, fmt.Sprintf("%s-c%d-added-p99-ratio", era, c))
			b.ReportMetric(tput, fmt.Sprintf("%s-c%d-tput-ratio", era, c))
		}
		stop()
		rpSrv.Close()
		fx.Close()
	}
	b.Log(report.String())
	fmt.Println(report.String())
}
