package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
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

// callsPerRun and reps size a measurement at one client: paired latency
// is taken over reps*callsPerRun paired calls per path, throughput as the
// median of reps interleaved runs of callsPerRun/2 calls per path; block
// latency over blockRounds rounds of one block of blockCalls calls per
// path. At more than one client, see size.at.
var (
	callsPerRun = envInt("MCPX_BENCH_CALLS", 3000)
	reps        = envInt("MCPX_BENCH_REPS", 3)
	blockCalls  = envInt("MCPX_BENCH_BLOCK", 2000)
	// Four rounds, not the two the target asks at least: a block's p99 is
	// its worst 1%, which one moment of machine noise can make, and
	// more blocks per path keep one such moment from setting it.
	blockRounds = envInt("MCPX_BENCH_ROUNDS", 4)
)

// size is how many calls a measurement makes (see the variables above):
// paired calls, blocks, and throughput runs of tput calls each, the
// median of tputRuns.
type size struct{ calls, reps, block, rounds, tput, tputRuns int }

// sized is a size as the variables above give it, for one client.
func sized(calls, reps, block, rounds int) size {
	return size{calls, reps, block, rounds, calls / 2, reps}
}

// at is sz as a measurement at clients makes it. At more than one client
// a block of 2,000 calls lasts 0.3–0.7 s, so its p99 is that of the
// bursts of machine noise that met it, and one block in four could set
// a path's p99 (docs/performance.md, "The 16-client block p99, call by
// call"): it takes four times the rounds. A throughput run there is as
// short (1,500 calls took about a fifth of a second, and one burst moved
// its ratio by a tenth or more: "Throughput runs' length"): each makes
// four times the calls, and the median is of 2*reps-1 runs, not reps.
func (sz size) at(clients int) size {
	if clients > 1 {
		sz.rounds *= 4
		sz.tput = 2 * sz.calls
		sz.tputRuns = 2*sz.reps - 1
	}
	return sz
}

// small is the size of the rows of small calls; large the size of the
// rows with a large argument, whose calls take ten times as long, so
// fewer of them fit in a run (their p99 rests on fewer samples).
var (
	small = sized(callsPerRun, reps, blockCalls, blockRounds)
	large = sized(envInt("MCPX_BENCH_LARGE_CALLS", 200), reps, envInt("MCPX_BENCH_LARGE_BLOCK", 200), 2)
)

// largeText is the large argument: 64 KiB of text, which the echo tool
// returns, so proxyd carries it both ways.
var largeText = strings.Repeat("benchmark payload ", 64<<10/18)

// largeRecords is a large argument as most tools' text is: JSON records,
// about 64 KiB as a JSON string like largeText, which on the wire has an
// escaped quote every few bytes: the slow path of reading a message,
// where plain text is the fast one.
var largeRecords = mcpserver.RecordsText(64 << 10)

// directEchoFrom has the fixture answer the large rows' echo itself:
// mcp-go decodes a 64 KiB message about ten times with encoding/json,
// which made each call 5–13 ms, and the spread of that time swung the
// proxies' added p50 by a fifth within a run. Small calls stay mcp-go's.
const directEchoFrom = 16 << 10

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
// pinned to each era, so one proxyd serves every combination, and the
// activity log bounded at benchMaxRows.
func benchConfig(upstream string) string {
	c := "listen: 127.0.0.1:0\nservers:\n" +
		"  - name: fxl\n    url: " + upstream + "\n    protocol: legacy\n" +
		"  - name: fxm\n    url: " + upstream + "\n    protocol: modern\n"
	if benchMaxRows > 0 {
		c += fmt.Sprintf("activity:\n  max_rows: %d\n", benchMaxRows)
	}
	return c
}

// benchMaxRows bounds proxyd's activity log, so that it is full within
// the first seconds and the rows measure a daemon that has run a while:
// one whose retention deletes as many records as its calls add. The
// default bound (1,000,000) is one no run reaches, which measured only
// a log that grows. MCPX_BENCH_MAX_ROWS=0 leaves it.
var benchMaxRows = func() int {
	if os.Getenv("MCPX_BENCH_MAX_ROWS") == "0" {
		return 0
	}
	return envInt("MCPX_BENCH_MAX_ROWS", 20_000)
}()

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
	// unnotified counts replayed answers to a call with a progressToken
	// that carried no progress notification.
	unnotified *atomic.Int64

	name    string
	url     string
	headers map[string]string
	tool    string
	// legacy: the path's client speaks the legacy era (else the modern).
	legacy bool
	// progress: call the fixture's progress tool with a progressToken (one
	// notification, an SSE answer) instead of echo.
	progress bool
	// text is the argument ("benchmark payload" when empty).
	text string
}

// conn is an MCP client session on a path, with the tap under its
// transport.
type conn struct {
	*client.Client
	tap *tap
	// end closes the session (once; again at the benchmark's end).
	end func()
}

// dial opens an initialised MCP client session on p.
func dial(b *testing.B, p path) conn {
	b.Helper()
	ctx := context.Background()
	tp := newTap()
	tr, err := transport.NewStreamableHTTP(p.url, transport.WithHTTPHeaders(p.headers),
		transport.WithHTTPBasicClient(&http.Client{Transport: tp}),
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
	end := sync.OnceFunc(func() { cl.Close() })
	b.Cleanup(end)
	c := conn{Client: cl, tap: tp, end: end}
	// Warm the connection and caches.
	for range 20 {
		p.call(b, c)
	}
	return c
}

// sample is one call's latency; ok: the call succeeded. start is when
// it began on the system's monotonic clock (see monotonic), for the dump.
type sample struct {
	took  time.Duration
	ok    bool
	start int64
}

// call calls the path's tool once with the client library and times it
// end to end, around CallTool. A failure is counted, not fatal, and its
// latency is left out; compare fails the run when a path loses more than
// 1% of its calls. So is a call that took other than one exchange (a
// resumed answer, a retried request): the fixture and proxyd give no
// event IDs to resume with, nor ask for input, so every call should be
// one POST, and one that is not is not comparable.
func (p path) call(b *testing.B, c conn) sample {
	c.tap.reset()
	start := monotonic()
	t0 := time.Now()
	text := p.text
	if text == "" {
		text = "benchmark payload"
	}
	req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: p.tool, Arguments: map[string]any{"text": text}}}
	if p.progress {
		req.Params.Meta = &mcp.Meta{ProgressToken: "bench"}
	}
	res, err := c.CallTool(context.Background(), req)
	took := time.Since(t0)
	if n := c.tap.took(); err == nil && n != 1 {
		err = fmt.Errorf("the call made %d HTTP exchanges, not one", n)
	}
	if err != nil || res.IsError {
		if p.failed.Add(1) == 1 {
			b.Logf("call of %s on %s: %v", p.tool, p.name, err)
		}
		return sample{start: start}
	}
	return sample{took, true, start}
}

// caller opens a client session on a path and returns its call (one
// call of the path's tool, timed) and the session's end. A measurement
// ends the sessions it opened once it is done, as a client does when it
// exits: left open, a run's sessions (about two thousand legacy ones by
// its last rows) would pile up in the upstream and in proxyd, and the
// rows measured late would meet servers heavier than the early ones did.
type caller func(b *testing.B, p path) (call func() sample, end func())

// sessions are the ends of the sessions a measurement opened.
type sessions []func()

// open opens a session on p with how and keeps its end.
func (s *sessions) open(b *testing.B, p path, how caller) func() sample {
	call, end := how(b, p)
	*s = append(*s, end)
	return call
}

// end ends them all.
func (s sessions) end() {
	for _, end := range s {
		end()
	}
}

// viaLibrary calls with the MCP client library (end to end; see
// path.call).
func viaLibrary(b *testing.B, p path) (func() sample, func()) {
	c := dial(b, p)
	return func() sample { return p.call(b, c) }, c.end
}

// timings are one path's call latencies, sorted once all are in.
type timings []time.Duration

// add takes the sample of a call that succeeded.
func (t *timings) add(s sample) {
	if s.ok {
		*t = append(*t, s.took)
	}
}

// latencies times calls per path over `clients` workers that each call
// every path in turn, in a fresh random order each round: the samples are
// paired, so a moment of machine noise lands on all paths alike instead of
// on whichever path was being measured. The order is shuffled, not
// rotated, because a call leaves work behind in the servers it crossed
// (the library's server ends a modern request's goroutines and collects
// its garbage after answering), which lands on the call that comes next:
// in a rotated order each path follows the same neighbour nearly every
// round, so one path would always pay for the same other path's wake.
// Besides each path's sorted latencies it returns the rounds, each path's
// sample by round, for the ratios' intervals (see paired).
func latencies(b *testing.B, paths []path, clients, calls int, how caller) ([]timings, paired) {
	b.Helper()
	got := make([][]sample, len(paths))
	for i := range got {
		got[i] = make([]sample, calls)
	}
	var open sessions
	defer func() { open.end() }()
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range clients {
		cls := make([]func() sample, len(paths))
		for i, p := range paths {
			cls[i] = open.open(b, p, how)
		}
		// A fixed seed per worker: runs shuffle alike.
		rng := rand.New(rand.NewPCG(uint64(w), 0))
		order := rng.Perm(len(paths))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := int(next.Add(1) - 1)
				if n >= calls {
					return
				}
				rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
				for _, i := range order {
					got[i][n] = cls[i]()
				}
			}
		}()
	}
	wg.Wait()
	return paired(got).timings(), got
}

// blocks times calls per path in warm sequential blocks: all clients call
// one path for a block of `calls` calls, then the next path, the paths
// alternating block by block (and the order rotating each round). It
// returns the latencies by round and path, for the intervals (blocked).
func blocks(b *testing.B, paths []path, clients, calls, rounds int, how caller) blocked {
	b.Helper()
	var open sessions
	defer func() { open.end() }()
	cls := make([][]func() sample, clients)
	for i := range cls {
		cls[i] = make([]func() sample, len(paths))
		for k, p := range paths {
			cls[i][k] = open.open(b, p, how)
		}
	}
	lat := make(blocked, rounds)
	for r := range rounds {
		lat[r] = make([]timings, len(paths))
		for k := range paths {
			i := (k + r) % len(paths)
			got := make([]sample, calls)
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
						got[n] = cls[w][i]()
					}
				}()
			}
			wg.Wait()
			for _, s := range got {
				lat[r][i].add(s)
			}
		}
	}
	return lat
}

// throughput makes `calls` calls of one path over `clients` workers, each
// calling as how has it, and returns calls per second.
func throughput(b *testing.B, p path, clients, calls int, how caller) float64 {
	b.Helper()
	var open sessions
	defer func() { open.end() }()
	workers := make([]func() sample, clients)
	for i := range workers {
		workers[i] = open.open(b, p, how)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for _, call := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(calls) {
				call()
			}
		}()
	}
	wg.Wait()
	return float64(calls) / time.Since(start).Seconds()
}

func methodNote() string {
	log := "proxyd's activity log unbounded in effect (1,000,000 rows)"
	if benchMaxRows > 0 {
		log = fmt.Sprintf("proxyd's activity log at its bound of %d rows from the first seconds", benchMaxRows)
	}
	many := small.at(16)
	return fmt.Sprintf("paired: %d paired calls per path; blocks: %d rounds (%d at 16 clients) of a %d-call block per path, paths alternating; calls/s: median of %d interleaved runs of %d calls (%d of %d at 16 clients); each measured with the library and (w: rows) on the wire; with a 64 KiB argument (+64k rows: plain text; +64kj rows: JSON records): %d paired, %d rounds of %d, %d runs of %d; %s",
		small.reps*small.calls, small.rounds, many.rounds, small.block, small.tputRuns, small.tput, many.tputRuns, many.tput,
		large.reps*large.calls, large.rounds, large.block, large.tputRuns, large.tput, log)
}

// reportHeader heads the table; the w: rows repeat each measurement on
// the wire, with the library's request replayed without it (see
// replayer).
func reportHeader() string {
	return "rows without w: are timed around the client library's CallTool;\n" +
		"w: rows replay the library's request without it (a fresh id per call), timed from sending it to the end of its answer\n" +
		fmt.Sprintf("%-17s %-3s %-11s %10s %10s %10s %10s %9s %11s %11s %11s %11s %6s\n", "client/up", "c", "path",
			"p50", "p99", "blk p50", "blk p99", "calls/s", "added p50", "added p99", "blk +p50", "blk +p99", "tput")
}

// ratios are proxyd's figures over the reverse proxy's: added latency at
// p50 and p99 by each method, and throughput.
type ratios struct{ p50, p99, blockP50, blockP99, tput float64 }

// eraRatios are the ratios against one era's baselines by both clocks.
type eraRatios struct{ e2e, wire ratios }

// verdict is one comparison's ratios: against the direct call and the
// reverse proxy in the client's era, and (cross-era combinations only)
// in the upstream's era, where the call proxyd makes is the one the
// direct and reverse-proxy clients make.
type verdict struct {
	client, upstream eraRatios
	cross            bool
}

// judged are the ratios the targets apply to: the upstream era's when the
// eras differ (proxyd pays the upstream's era on its side, which the
// client's-era baselines do not), else the client's.
func (v verdict) judged() eraRatios {
	if v.cross {
		return v.upstream
	}
	return v.client
}

// addedRatio is proxyd's added latency over the reverse proxy's, each
// over the direct call d (0 with "n/a" when the reverse proxy added
// nothing measurable: a ratio would be noise).
func addedRatio(d, rp, pd time.Duration) (float64, string) {
	r := ratioOf(d, rp, pd)
	text := ratioText(r)
	if math.IsInf(r, 1) {
		r = 0
	}
	return r, text
}

func pct(lat []time.Duration, q int) time.Duration {
	if len(lat) == 0 {
		return 0 // every call failed; compare fails the run
	}
	return lat[len(lat)*q/100]
}

// quantiles are a path's latency percentiles by each method, on one clock.
type quantiles struct{ p50, p99, b50, b99 time.Duration }

func quantilesOf(paired, blocks []time.Duration) quantiles {
	return quantiles{pct(paired, 50), pct(paired, 99), pct(blocks, 50), pct(blocks, 99)}
}

// addedRatios are proxyd's added-latency ratios over direct path d and
// reverse proxy rp by each method (throughput left 0), and their text.
func addedRatios(q []quantiles, d, rp int) (ratios, string) {
	var r ratios
	var s [4]string
	r.p50, s[0] = addedRatio(q[d].p50, q[rp].p50, q[pProxyd].p50)
	r.p99, s[1] = addedRatio(q[d].p99, q[rp].p99, q[pProxyd].p99)
	r.blockP50, s[2] = addedRatio(q[d].b50, q[rp].b50, q[pProxyd].b50)
	r.blockP99, s[3] = addedRatio(q[d].b99, q[rp].b99, q[pProxyd].b99)
	return r, fmt.Sprintf("paired p50 %s p99 %s, blocks p50 %s p99 %s", s[0], s[1], s[2], s[3])
}

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
func compare(b *testing.B, report *strings.Builder, label string, clients int, sz size, paths []path) verdict {
	b.Helper()
	sz = sz.at(clients)
	for i := range paths {
		paths[i].failed = &atomic.Int64{}
		if paths[i].progress {
			paths[i].unnotified = &atomic.Int64{}
		}
	}
	lat, rounds := latencies(b, paths, clients, sz.reps*sz.calls, viaLibrary)
	blk := blocks(b, paths, clients, sz.block, sz.rounds, viaLibrary)
	// Again on the wire: the library's CPU per call (its modern client's
	// about twice its legacy one's) takes the cores the servers and
	// proxies need, most of all at 16 clients, and in a cross-era row it
	// would count against whichever path has the dearer client.
	wlat, wrounds := latencies(b, paths, clients, sz.reps*sz.calls, replayed)
	dumpRounds(b, label, clients, "e2e", paths, rounds)
	dumpRounds(b, label, clients, "wire", paths, wrounds)
	wblk := blocks(b, paths, clients, sz.block, sz.rounds, replayed)
	runs, wireRuns := make([][]float64, len(paths)), make([][]float64, len(paths))
	for range sz.tputRuns {
		for i, p := range paths {
			runs[i] = append(runs[i], throughput(b, p, clients, sz.tput, viaLibrary))
			wireRuns[i] = append(wireRuns[i], throughput(b, p, clients, sz.tput, replayed))
		}
	}
	n := len(paths)
	blkLat, wblkLat := blk.timings(), wblk.timings()
	e2e, wire := make([]quantiles, n), make([]quantiles, n)
	perSec, wirePerSec := make([]float64, n), make([]float64, n)
	median := func(v []float64) float64 {
		slices.Sort(v)
		return v[len(v)/2]
	}
	for i := range paths {
		e2e[i] = quantilesOf(lat[i], blkLat[i])
		wire[i] = quantilesOf(wlat[i], wblkLat[i])
		perSec[i], wirePerSec[i] = median(runs[i]), median(wireRuns[i])
	}
	us := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	// The rows: each path with its latency added over a direct path d.
	type row struct {
		name string
		i, d int
	}
	rows := []row{{paths[pDirect].name, pDirect, pDirect}, {paths[pRproxy].name, pRproxy, pDirect}, {paths[pProxyd].name, pProxyd, pDirect}}
	cross := n > pDirectUp
	if cross {
		rows = append(rows, row{paths[pDirectUp].name, pDirectUp, pDirectUp}, row{paths[pRproxyUp].name, pRproxyUp, pDirectUp}, row{"proxyd/up", pProxyd, pDirectUp})
	}
	for _, r := range rows {
		q, d := e2e[r.i], e2e[r.d]
		fmt.Fprintf(report, "%-17s %-3d %-11s %10s %10s %10s %10s %9.0f %11s %11s %11s %11s %5.0f%%\n", label, clients, r.name,
			us(q.p50), us(q.p99), us(q.b50), us(q.b99), perSec[r.i],
			us(q.p50-d.p50), us(q.p99-d.p99), us(q.b50-d.b50), us(q.b99-d.b99), 100*perSec[r.i]/perSec[r.d])
	}
	for _, r := range rows {
		q, d := wire[r.i], wire[r.d]
		fmt.Fprintf(report, "%-17s %-3d %-11s %10s %10s %10s %10s %9.0f %11s %11s %11s %11s %5.0f%%\n", label, clients, "w:"+r.name,
			us(q.p50), us(q.p99), us(q.b50), us(q.b99), wirePerSec[r.i],
			us(q.p50-d.p50), us(q.p99-d.p99), us(q.b50-d.b50), us(q.b99-d.b99), 100*wirePerSec[r.i]/wirePerSec[r.d])
	}
	for i, p := range paths {
		if p.unnotified != nil && p.unnotified.Load() > 0 {
			fmt.Fprintf(report, "  (%s: %d replayed answers without their progress notification)\n", p.name, p.unnotified.Load())
			if i == pProxyd {
				// The fixture writes it before the result: proxyd must relay it.
				b.Errorf("%s %s: %d answers without their progress notification", label, p.name, p.unnotified.Load())
			}
		}
	}
	// Every path makes about as many calls; a path losing over 1% fails the run.
	total := 2*(sz.reps*sz.calls+sz.tputRuns*sz.tput) + 2*sz.rounds*sz.block + 40*clients*n
	for _, p := range paths {
		if failed := p.failed.Load(); failed > 0 {
			fmt.Fprintf(report, "  (%s: %d of about %d calls failed)\n", p.name, failed, total)
			if failed*100 > int64(total) {
				b.Errorf("%s %s: %d of about %d calls failed", label, p.name, failed, total)
			}
		}
	}
	// one prints a clock's verdict lines (end to end, or on the wire: how
	// and tag say which) and returns its ratios.
	one := func(era, how, tag string, q []quantiles, perSec []float64, rs paired, bs blocked, d, rp int) ratios {
		r, s := addedRatios(q, d, rp)
		iv, biv := rs.intervals(d, rp, pProxyd), bs.intervals(d, rp, pProxyd)
		r.tput = perSec[pProxyd] / perSec[rp]
		fmt.Fprintf(report, "  => %s era%s: proxyd added latency vs reverse proxy: %s; throughput %.0f%% of reverse proxy\n", era, how, s, 100*r.tput)
		fmt.Fprintf(report, "     intervals (90%%): paired, rounds resampled: %s; blocks, rounds of blocks resampled: %s\n", iv, biv)
		fmt.Fprintf(report, "SUMMARY%s %s c%d %s %.3f %.3f %.3f %.3f %.3f\n", tag, label, clients, era, r.p50, r.p99, r.blockP50, r.blockP99, r.tput)
		fmt.Fprintf(report, "INTERVAL%s %s c%d %s %s %s\n", tag, label, clients, era, iv.fields(), biv.fields())
		return r
	}
	side := func(era string, d, rp int) eraRatios {
		// Composite literal elements are evaluated in order: end to end
		// is printed first.
		return eraRatios{
			e2e:  one(era, "", "", e2e, perSec, rounds, blk, d, rp),
			wire: one(era, ", on the wire", "-WIRE", wire, wirePerSec, wrounds, wblk, d, rp),
		}
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
// targets apply to, and in a cross-era combination the client era's too;
// each end to end and (suffix -wire, no throughput) on the wire.
func reportRatios(b *testing.B, label string, clients int, v verdict) {
	metrics := func(suffix string, r eraRatios) {
		for _, m := range []struct {
			suffix string
			r      ratios
		}{{suffix, r.e2e}, {suffix + "-wire", r.wire}} {
			b.ReportMetric(m.r.p50, fmt.Sprintf("%s-c%d-p50-ratio%s", label, clients, m.suffix))
			b.ReportMetric(m.r.p99, fmt.Sprintf("%s-c%d-p99-ratio%s", label, clients, m.suffix))
			b.ReportMetric(m.r.blockP50, fmt.Sprintf("%s-c%d-block-p50-ratio%s", label, clients, m.suffix))
			b.ReportMetric(m.r.blockP99, fmt.Sprintf("%s-c%d-block-p99-ratio%s", label, clients, m.suffix))
			b.ReportMetric(m.r.tput, fmt.Sprintf("%s-c%d-tput-ratio%s", label, clients, m.suffix))
		}
	}
	metrics("", v.judged())
	if v.cross {
		metrics("-client-era", v.client)
	}
}

// comboPaths are the paths compared in combination cb: tool on the
// fixture directly and through the reverse proxy, with a client in the
// client's era and (cross-era) in the upstream's, and through proxyd.
func comboPaths(cb combo, upstream string, rproxy [2]string, proxydURL string, auth map[string]string, tool string, progress bool, text string) []path {
	legacy := cb.client == "legacy"
	era := map[bool]string{true: "L", false: "M"}
	ps := []path{
		{name: "direct/" + era[legacy], url: upstream, tool: tool, legacy: legacy, progress: progress},
		{name: "rproxy/" + era[legacy], url: rproxy[0], tool: tool, legacy: legacy, progress: progress},
		{name: "proxyd", url: proxydURL, headers: auth, tool: proxydPrefix(cb.upstream) + tool, legacy: legacy, progress: progress},
	}
	if cb.cross() {
		ps = append(ps,
			path{name: "direct/" + era[!legacy], url: upstream, tool: tool, legacy: !legacy, progress: progress},
			path{name: "rproxy/" + era[!legacy], url: rproxy[1], tool: tool, legacy: !legacy, progress: progress})
	}
	for i := range ps {
		ps[i].text = text
	}
	return ps
}

// runCombos measures every era combination at 1 and 16 clients against
// the fixture at upstream, the reverse proxies at rproxy and proxyd at
// proxydURL, then per combination at 1 client a call with a
// progressToken (an SSE answer) and a call with a 64 KiB argument. A
// cross-era combination measures the reverse proxy in both eras, each on
// its own (rproxy[0] in the client's era, rproxy[1] in the other): like
// proxyd, each then serves one path of the paired run, so neither is kept
// warmer by the other's calls.
func runCombos(b *testing.B, report *strings.Builder, upstream string, rproxy [2]string, proxydURL, token string) {
	auth := map[string]string{"Authorization": "Bearer " + token}
	plain := func() {
		for _, cb := range combos {
			if !selected("MCPX_BENCH_COMBOS", cb.String()) {
				continue
			}
			paths := comboPaths(cb, upstream, rproxy, proxydURL, auth, "echo", false, "")
			for _, c := range []int{1, 16} {
				if !selected("MCPX_BENCH_CLIENTS", fmt.Sprint(c)) {
					continue
				}
				reportRatios(b, strings.ReplaceAll(cb.String(), "/", "-"), c, compare(b, report, cb.String(), c, small, paths))
			}
		}
	}
	// Each other kind of row: its report heading, the tag after the
	// combination in the table ("legacy/modern+p") and in the metrics'
	// names ("legacy-modern-progress"), and the call it makes; at 1 client.
	oneClient := func(head, tag, metric, tool, text string, progress bool, sz size) func() {
		return func() {
			if !selected("MCPX_BENCH_CLIENTS", "1") {
				return
			}
			fmt.Fprintf(report, "%s:\n", head)
			for _, cb := range combos {
				if !selected("MCPX_BENCH_COMBOS", cb.String()) {
					continue
				}
				paths := comboPaths(cb, upstream, rproxy, proxydURL, auth, tool, progress, text)
				label := strings.ReplaceAll(cb.String(), "/", "-") + "-" + metric
				reportRatios(b, label, 1, compare(b, report, cb.String()+"+"+tag, 1, sz, paths))
			}
		}
	}
	kinds := map[string]func(){
		"plain":    plain,
		"progress": oneClient("calls with a progressToken (the fixture's progress tool, one notification: an SSE answer)", "p", "progress", "progress", "", true, small),
		"large":    oneClient("calls with a 64 KiB argument (the echo tool returns it)", "64k", "64k", "echo", largeText, false, large),
		"records":  oneClient("calls with a 64 KiB argument of JSON records (escaped quotes every few bytes; the echo tool returns it)", "64kj", "64k-records", "echo", largeRecords, false, large),
	}
	for _, kind := range rowKinds() {
		run, ok := kinds[kind]
		if !ok {
			b.Fatalf("MCPX_BENCH_ROWS: no kind of rows %q (plain, progress, large, records)", kind)
		}
		run()
	}
}

// rowKinds are the kinds of rows to run, in order: as MCPX_BENCH_ROWS
// lists them (comma-separated; "large,plain" runs the large rows first),
// or unset, plain, progress, large and records.
func rowKinds() []string {
	if v := os.Getenv("MCPX_BENCH_ROWS"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"plain", "progress", "large", "records"}
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
	fx, err := mcpserver.Start(mcpserver.Options{Era: mcpserver.EraBoth, DirectEchoFrom: directEchoFrom})
	if err != nil {
		b.Fatal(err)
	}
	defer fx.Close()
	target, _ := url.Parse(strings.TrimSuffix(fx.URL(), "/mcp"))
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64}
	rpSrv, rpSrv2 := httptest.NewServer(rp), httptest.NewServer(rp)
	defer rpSrv.Close()
	defer rpSrv2.Close()
	pURL, token, stop := startProxyd(b, fx.URL())
	defer stop()
	runCombos(b, &report, fx.URL(), [2]string{rpSrv.URL + "/mcp", rpSrv2.URL + "/mcp"}, pURL, token)
	fmt.Println(report.String())
}
