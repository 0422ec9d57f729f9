package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/commands"
	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/tcpproxy"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/proxyd"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// The soak's pass criteria.
const (
	soakMaxRSS = 150 << 20 // bytes, with proxyd's own collector settings (no fixed memory limit)
	// status answers within this: every time in 'make soak', which runs
	// alone; at the median in the short version, which shares two cores
	// with the rest of 'make test' (a blocked socket would fail it still:
	// every answer would be late).
	soakStatusBudget = 100 * time.Millisecond
	// After a phase, proxyd's descriptors and goroutines come back to
	// their level before it, within these margins (the misbehaving
	// upstreams reconnect on their own schedule meanwhile).
	soakFDSlack        = 12
	soakGoroutineSlack = 40
)

// soakPlan is how long the soak runs: MCPX_SOAK_PHASES phases of
// MCPX_SOAK_PHASE each ('make soak'); by default two short ones, the
// version 'make test' runs.
func soakPlan(t *testing.T) (phases int, phase time.Duration) {
	phases, phase = 2, 5*time.Second
	if v := os.Getenv("MCPX_SOAK_PHASES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("MCPX_SOAK_PHASES=%q: want a positive number", v)
		}
		phases = n
	}
	if v := os.Getenv("MCPX_SOAK_PHASE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("MCPX_SOAK_PHASE=%q: want a positive duration", v)
		}
		phase = d
	}
	return phases, phase
}

// proc reads one process's resident memory and descriptors.
type proc int

func (p proc) rss() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", int(p)))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cpu is the process's CPU time so far.
func (p proc) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", int(p)))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // clock ticks of 100 Hz
}

func (p proc) fds() int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", int(p)))
	return len(ents)
}

// alive: running, not a zombie waiting to be reaped.
func (p proc) alive() bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", int(p)))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// goroutines reads go_goroutines from proxyd's metrics, through one
// client whose connection is reused (a client per poll would leave
// proxyd holding a connection per poll until its idle timeout).
func goroutines(c *api.Client) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := c.Metrics(ctx)
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(m, "\n") {
		if v, ok := strings.CutPrefix(l, "go_goroutines "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f)
		}
	}
	return -1
}

// statusOnce asks proxyd's status on a fresh socket connection, as a
// new 'mcpx status' process does, and returns how long the answer took.
func statusOnce(socket string) (time.Duration, error) {
	start := time.Now()
	c, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return time.Since(start), err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	resp, err := rawRequest(c, bufio.NewReader(c), "GET /v1/status HTTP/1.1\r\nHost: proxyd.sock\r\nConnection: close\r\n\r\n")
	d := time.Since(start)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return d, err
}

// openConns reads how many client connections the MCP endpoint has open.
func openConns(c *api.Client) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := c.Metrics(ctx)
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(m, "\n") {
		if v, ok := strings.CutPrefix(l, `mcpx_open_connections{listener="mcp"} `); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f)
		}
	}
	return -1
}

// soakUpstreams are the upstream servers: well-behaved ones (their calls
// must all succeed) and misbehaving ones.
type soakUpstreams struct {
	config string
	good   []string // exposed tools whose every call must succeed
	bad    []string // exposed tools of misbehaving upstreams and odd names
	slow   string
}

func startSoakUpstreams(t *testing.T, auth authFixture, envCanary, headerCanary string) soakUpstreams {
	t.Helper()
	fixture := func(era mcpserver.Era, extra int, faults ...mcpserver.Fault) *mcpserver.Server {
		s, err := mcpserver.Start(mcpserver.Options{Era: era, ExtraTools: extra})
		if err != nil {
			t.Fatalf("starting a fixture: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		for _, f := range faults {
			if _, err := s.AddFault(f); err != nil {
				t.Fatalf("fault %+v: %v", f, err)
			}
		}
		return s
	}
	sse := func(shape string, get bool) mcpserver.Fault {
		f := mcpserver.Fault{Kind: mcpserver.FaultSSE, SSE: shape, Tool: mcpserver.ToolEcho, DelayMS: 20}
		if get {
			f.Method, f.Tool = mcpserver.MethodGET, ""
		}
		return f
	}
	good := fixture(mcpserver.EraLegacy, 0)
	goodModern := fixture(mcpserver.EraModern, 0)
	line := fixture(mcpserver.EraLegacy, 0, sse(mcpserver.SSEEndlessLine, true), sse(mcpserver.SSEEndlessLine, false))
	drip := fixture(mcpserver.EraLegacy, 0, sse(mcpserver.SSEDrip, true), sse(mcpserver.SSEDrip, false))
	endless := fixture(mcpserver.EraLegacy, 0, sse(mcpserver.SSEEndless, false))
	huge := fixture(mcpserver.EraLegacy, 0, mcpserver.Fault{Kind: mcpserver.FaultSSE, SSE: mcpserver.SSEHugeEvent, Tool: mcpserver.ToolEcho, Bytes: 4 << 20})
	wrongID := fixture(mcpserver.EraLegacy, 0, mcpserver.Fault{Kind: mcpserver.FaultWrongID, Tool: mcpserver.ToolEcho})
	resets := fixture(mcpserver.EraLegacy, 0, mcpserver.Fault{Kind: mcpserver.FaultReset, Tool: mcpserver.ToolEcho})
	many := fixture(mcpserver.EraBoth, 10_000)
	behindFlaky := fixture(mcpserver.EraLegacy, 0)
	fu, _ := url.Parse(behindFlaky.URL())
	// A network that drops each connection after a few milliseconds to a
	// second.
	flaky, err := tcpproxy.Start(fu.Host, func() time.Duration { return time.Duration(5+rand.IntN(1000)) * time.Millisecond })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(flaky.Close)
	// A server that sends every request to another origin, which proxyd
	// refuses to follow (credentials stay with the configured server).
	redirect := httptest.NewServer(http.RedirectHandler(good.URL(), http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)

	u := soakUpstreams{slow: "good__" + mcpserver.ToolSlowRead}
	var cfg strings.Builder
	// A fixed port: clients find proxyd again after each restart.
	fmt.Fprintf(&cfg, "listen: %s\n", freeAddr(t))
	cfg.WriteString(`activity: {durability: sync}
limits: {read_header_timeout: 2s, read_timeout: 2s, idle_timeout: 5s}
servers:
`)
	add := func(name, url, extra string) {
		fmt.Fprintf(&cfg, "  - name: %s\n    url: %s\n%s", name, url, extra)
	}
	add("good", good.URL(), "    protocol: legacy\n    headers: {X-Api-Key: "+headerCanary+"}\n")
	add("goodm", goodModern.URL(), "    protocol: modern\n")
	add("docs", auth.MCP, "")
	add("line", line.URL(), "    protocol: legacy\n    max_response_bytes: 1048576\n")
	add("drip", drip.URL(), "    protocol: legacy\n    stream_idle_timeout: 1s\n    timeout: 3s\n")
	add("endless", endless.URL(), "    protocol: legacy\n    timeout: 2s\n")
	add("huge", huge.URL(), "    protocol: legacy\n    max_response_bytes: 1048576\n")
	add("wrongid", wrongID.URL(), "    protocol: legacy\n")
	add("resets", resets.URL(), "    protocol: legacy\n")
	add("many", many.URL(), "")
	add("flaky", flaky.URL(behindFlaky.URL()), "    protocol: legacy\n")
	add("redirect", redirect.URL+"/mcp", "")
	fmt.Fprintf(&cfg, `  - name: leaky
    command: /bin/sh
    args: ["-c", "echo \"starting with LEAKY_TOKEN=$LEAKY_TOKEN\" >&2; exit 3"]
    env: {LEAKY_TOKEN: %s}
`, envCanary)
	u.config = cfg.String()
	u.good = []string{"good__echo", "goodm__echo", "docs__echo"}
	u.bad = []string{"line__echo", "drip__echo", "endless__echo", "huge__echo", "wrongid__echo", "resets__echo",
		"many__tool_05000", "flaky__echo", "redirect__echo", "leaky__echo", "\x1b]0;pwned\x07good__echo", "no__such_tool"}
	return u
}

// TestHostileSoak runs proxyd against misbehaving upstreams and hostile
// clients, phase after phase, with a SIGKILL and a restart between
// phases, and checks the pass criteria, printed as figures: proxyd's RSS
// under soakMaxRSS (the collector's memory limit off), descriptors and
// goroutines back to their level after each phase, 'mcpx status'
// answering within soakStatusBudget throughout, every call of the
// well-behaved clients to well-behaved upstreams successful, no committed
// record and no token lost across the SIGKILLs, and no canary anywhere.
func TestHostileSoak(t *testing.T) {
	phases, phaseLen := soakPlan(t)
	const envCanary, headerCanary = "canary-soak-env-5b8e21", "canary-soak-hdr-c07d93"
	auth := startAuthFixture(t, "--era", "legacy")
	ups := startSoakUpstreams(t, auth, envCanary, headerCanary)
	o := newOAuthEnv(t)

	o.writeConfig(ups.config)
	o.up()
	o.mustRun("login", "docs")
	ready := func() proc {
		for _, s := range []string{"good", "goodm", "docs", "many"} {
			o.waitServer(s, api.StateReady)
		}
		return proc(o.status().PID)
	}
	p := ready()
	ci := o.connectInfo()
	mc := api.NewClient(o.Socket, "soak")
	addr := strings.TrimSuffix(strings.TrimPrefix(ci.URL, "http://"), "/mcp")
	t.Logf("soak: %d phases of %s; pass: RSS < %d MB, fds within +%d and goroutines within +%d of their level after each phase, status < %s",
		phases, phaseLen, soakMaxRSS>>20, soakFDSlack, soakGoroutineSlack, soakStatusBudget)

	var good tally
	var maxRSS int64
	var statusLat, cliLat []time.Duration
	for phase := 1; phase <= phases; phase++ {
		var wg sync.WaitGroup
		run := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
		loads := map[string]*tally{}
		load := func(name string) *tally { tl := &tally{}; loads[name] = tl; return tl }
		hostile, cancelled, noToken, slowHead, slowBody, huge, floods := load("hostile calls"), load("cancelled calls"),
			load("401 then idle"), load("slow headers dropped"), load("slow bodies dropped"), load("413 bodies"), load("sessions opened")
		// The calls that reach upstreams: well-behaved clients in both
		// eras, calls to the misbehaving upstreams, cancelled calls and a
		// token refresh (whose rotated refresh token must survive the
		// SIGKILL that ends the phase).
		upstreamLoad := func(ctx context.Context) {
			for n, v := range []string{mcp.LATEST_LEGACY_PROTOCOL_VERSION, mcp.LATEST_PROTOCOL_VERSION, mcp.LATEST_LEGACY_PROTOCOL_VERSION} {
				run(func() { echoes(ctx, ci, v, ups.good, n, &good) })
			}
			run(func() { hostileCalls(ctx, ci, ups.bad, hostile) })
			run(func() { hostileCalls(ctx, ci, slices.Concat(ups.bad[3:], ups.bad[:3]), hostile) })
			run(func() { cancellations(ctx, ci, ups.slow, cancelled) })
			run(func() { o.runRaw(append(o.globals(), "drill", "refresh", "docs", "--callers", "5")...) })
		}
		// The level to come back to is taken after a warm-up with the
		// same upstream load, so that connections the upstream pools keep
		// (for their idle timeout) are in it: what is left over after the
		// phase is what the hostile load left.
		warm, stopWarm := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		upstreamLoad(warm)
		wg.Wait()
		stopWarm()
		waitfor.Cond(t, 10*time.Second, "the warm-up's client connections to close", func() (bool, string) {
			n := openConns(mc)
			return n == 0, fmt.Sprintf("%d open", n)
		})
		baseFDs, baseG := p.fds(), goroutines(mc)

		ctx, stop := context.WithCancel(context.Background())
		cpu0, t0 := p.cpu(), time.Now()
		upstreamLoad(ctx)
		run(func() { rawConns(ctx, addr, 300, noToken) })
		for range 3 {
			run(func() { slowSenders(ctx, ci, addr, false, slowHead) })
			run(func() { slowSenders(ctx, ci, addr, true, slowBody) })
		}
		run(func() { hugeBodies(ctx, ci, 6<<20, huge) })
		run(func() { sessionFlood(ctx, ci, floods) })

		// proxyd's memory and descriptors, and status, throughout.
		var mu sync.Mutex
		peakFDs := 0
		run(func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for ctx.Err() == nil {
				rss, fds := p.rss(), p.fds()
				mu.Lock()
				maxRSS, peakFDs = max(maxRSS, rss), max(peakFDs, fds)
				mu.Unlock()
				<-tick.C
			}
		})
		// Status, as 'mcpx status' asks it (a fresh connection to the
		// socket, one request): proxyd's answer time, four times a second;
		// and the whole command (process start included) once a second.
		run(func() {
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ctx.Err() == nil; i++ {
				d, err := statusOnce(o.Socket)
				mu.Lock()
				statusLat = append(statusLat, d)
				mu.Unlock()
				if err != nil {
					good.fail("status during phase %d: %v", phase, err)
				}
				if i%4 == 0 {
					start := time.Now()
					r := o.runRaw(append(o.globals(), "status", "-o", "json")...)
					d := time.Since(start)
					mu.Lock()
					cliLat = append(cliLat, d)
					mu.Unlock()
					if r.code != 0 {
						good.fail("mcpx status during phase %d: %s", phase, r)
					}
				}
				<-tick.C
			}
		})

		timer := time.NewTimer(phaseLen)
		<-timer.C
		cpuShare := float64(p.cpu()-cpu0) / float64(time.Since(t0)) * 100
		stop()
		wg.Wait()

		// Back to the level before the phase once the clients are gone.
		var fds, g int
		waitfor.Cond(t, 20*time.Second, "descriptors and goroutines back to their level", func() (bool, string) {
			fds, g = p.fds(), goroutines(mc)
			return fds <= baseFDs+soakFDSlack && g <= baseG+soakGoroutineSlack,
				fmt.Sprintf("%d fds (level %d), %d goroutines (level %d)", fds, baseFDs, g, baseG)
		})
		rssNow := p.rss()
		t.Logf("phase %d: proxyd used %.0f%% of a core; RSS now %.1f MB (max so far %.1f MB); fds %d -> peak %d -> %d; goroutines %d -> %d",
			phase, cpuShare, float64(rssNow)/(1<<20), float64(maxRSS)/(1<<20), baseFDs, peakFDs, fds, baseG, g)
		names := make([]string, 0, len(loads))
		for n := range loads {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			t.Logf("  %s: %d (%d other outcomes)", n, loads[n].ok.Load(), loads[n].failed.Load())
		}
		for _, n := range []string{"413 bodies"} {
			if tl := loads[n]; tl.failed.Load() > 0 {
				t.Errorf("%s: %d failures: %v", n, tl.failed.Load(), tl.errs)
			}
		}

		// SIGKILL, restart: every call a client saw finish is recorded,
		// and the grant still works.
		if err := syscall.Kill(int(p), syscall.SIGKILL); err != nil {
			t.Fatalf("SIGKILL of proxyd: %v", err)
		}
		waitfor.True(t, 10*time.Second, "the killed proxyd to go", func() bool { return !p.alive() })
		// As a user would: once status says it is not running, start it.
		waitfor.Cond(t, 10*time.Second, "status to say proxyd is not running", func() (bool, string) {
			r := o.runRaw(append(o.globals(), "status")...)
			return r.code == commands.ExitProxydNotRunning, r.String()
		})
		o.up()
		p = ready()
		recorded := o.okRecords(ups.good)
		t.Logf("phase %d: SIGKILL and restart: %d calls of well-behaved clients succeeded so far, %d recorded", phase, good.ok.Load(), recorded)
		if recorded < int(good.ok.Load()) {
			t.Errorf("after SIGKILL: %d ok records of well-behaved calls, but the clients saw %d succeed", recorded, good.ok.Load())
		}
		if r := o.run("call", "docs", "echo", "text=after-kill"); r.code != 0 || !strings.Contains(r.stdout, "after-kill") {
			t.Errorf("the signed-in server after SIGKILL:\n%s", r)
		}
		if st := auth.stats(t); st.ReuseDetected != 0 || st.RevokedGrants != 0 {
			t.Errorf("a refresh token was lost (reused after a restart): %+v", st)
		}
	}

	slices.Sort(statusLat)
	slices.Sort(cliLat)
	q := func(d []time.Duration, f float64) time.Duration {
		return d[int(f*float64(len(d)-1))].Round(time.Millisecond)
	}
	t.Logf("soak: RSS max %.1f MB (bound %d MB); status answered in p50 %s, p99 %s, max %s over %d requests (budget %s); "+
		"the whole 'mcpx status' command p50 %s, max %s over %d runs; well-behaved calls %d ok, %d failed",
		float64(maxRSS)/(1<<20), soakMaxRSS>>20, q(statusLat, .5), q(statusLat, .99), q(statusLat, 1), len(statusLat), soakStatusBudget,
		q(cliLat, .5), q(cliLat, 1), len(cliLat), good.ok.Load(), good.failed.Load())
	if maxRSS > soakMaxRSS {
		t.Errorf("proxyd's RSS reached %.1f MB, over %d MB", float64(maxRSS)/(1<<20), soakMaxRSS>>20)
	}
	if strict := os.Getenv("MCPX_SOAK_PHASES") != ""; strict && q(statusLat, 1) > soakStatusBudget {
		t.Errorf("status took %s at worst, over %s", q(statusLat, 1), soakStatusBudget)
	} else if q(statusLat, .5) > soakStatusBudget {
		t.Errorf("status took %s at the median, over %s", q(statusLat, .5), soakStatusBudget)
	}
	if good.failed.Load() > 0 || good.ok.Load() == 0 {
		t.Errorf("well-behaved calls: %d ok, %d failed: %v", good.ok.Load(), good.failed.Load(), good.errs)
	}

	// No canary anywhere: the outputs, proxyd's log, the state files.
	// The endpoint's bearer token is shown by 'mcpx connect-info' (that is
	// its job) and kept in proxyd.token, nowhere else.
	token := strings.TrimPrefix(ci.Header, "Authorization: Bearer ")
	places := map[string]string{"proxyd.log": o.proxydLog()}
	for i, out := range o.outputs {
		places[fmt.Sprintf("output #%d", i)] = out
	}
	for name, b := range o.stateFiles() {
		if name != proxyd.TokenFile {
			places[name] = b
		}
	}
	for where, text := range places {
		canaries := []string{envCanary, headerCanary}
		if !strings.HasPrefix(where, "output") {
			canaries = append(canaries, token)
		}
		for _, canary := range canaries {
			if strings.Contains(text, canary) {
				t.Errorf("%s holds a secret (%.12s...)", where, canary)
			}
		}
	}
}

// okRecords counts the activity log's successful calls of the given
// exposed tools.
func (e *env) okRecords(exposed []string) int {
	e.t.Helper()
	r := e.mustRun("activity", "export", "--status", "ok", "--format", "jsonl")
	n := 0
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct{ Server, Tool string }
		if json.Unmarshal(sc.Bytes(), &rec) == nil && slices.Contains(exposed, rec.Server+"__"+rec.Tool) {
			n++
		}
	}
	return n
}
