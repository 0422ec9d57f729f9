package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/conformance"
	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// The server suite: the official conformance suite's server scenarios
// (the newest suite, conformance-next in tools/peers) against the
// reference fixture (fixtures/conformance), directly and through proxyd
// with prefix: "" so names are the upstream's own.
//
// Rule: every scenario that passes directly passes through proxyd, in
// every combination of upstream era (proxyd pinned legacy or modern) and
// downstream spec version (the suite as client at 2025-11-25 or
// 2026-07-28). What does not yet is listed in knownProxyFailures with the
// reason; the test fails when a listed scenario passes (shrink the list)
// and when an unlisted one fails.

// Spec versions the suite runs at, and the upstream eras proxyd is pinned to.
var (
	suiteVersions  = []string{"2025-11-25", "2026-07-28"}
	upstreamPinned = []string{"legacy", "modern"}
)

// proxyFailure is a scenario known to fail through proxyd in the
// combinations it names ("*" matches any upstream era or any version).
type proxyFailure struct {
	upstream, version, scenario, reason string
}

// knownProxyFailures are the scenarios that pass against the fixture
// directly but not yet through proxyd, with the reason. The relay work
// empties this list: remove an entry as soon as its scenario passes (the
// test says so), and never add one to hide a regression.
var knownProxyFailures = []proxyFailure{
	// A modern-era client (2026-07-28) through a legacy upstream: what the
	// legacy era cannot carry.
	{"legacy", "2026-07-28", "input-required-result-basic-elicitation", inputKeysUnknown},
}

// Why entries of knownProxyFailures fail.
const (
	// The reference server names its input requests ("user_name", which
	// the suite checks for in inputRequests); speaking the legacy era it
	// sends the same request as an elicitation/create, which has no name,
	// so proxyd names it itself (mcpx-N) in the input_required result it
	// makes for the modern client. Nothing on the legacy wire carries the
	// name.
	inputKeysUnknown = "the input request's key is the server's own choice, which a legacy upstream's elicitation/create does not carry; proxyd names it mcpx-N"
)

// The suite's extension scenarios (tasks-* for SEP-2663 tasks, and
// sep-2640-skills-*) are not run: `--suite all` leaves extensions out, and
// the reference server cannot serve them with reasonable effort. The MCP
// library (mcp-go v1.2.1) implements tasks as the 2025-11-25 revision had
// them (a task param on the request, a nested task in the result,
// tasks/result), not SEP-2663's (resultType "task" with a flat
// CreateTaskResult, the result inlined in tasks/get, no tasks/result,
// negotiated under capabilities.extensions), and has no skills
// (skills/list, skills/get, resources/directory/read); its server routes
// only the methods it knows, so both would be hand-written JSON-RPC in
// front of it. Through proxyd they need relaying that does not exist
// yet: tasks/get and tasks/cancel routed by task id to the upstream that
// made the task, skills aggregated across upstreams, and the extensions
// declared in proxyd's own discover and initialize results.

// notExercisedDirectly are scenarios whose checks do not apply to the
// fixture (the suite reports no pass or fail for them), with the reason.
var notExercisedDirectly = map[string]string{
	// The suite closes the tool call's SSE stream to test polling; mcp-go
	// answers the call as plain JSON, so the suite only reports INFO.
	"server-sse-polling": "mcp-go answers test_reconnection with JSON, not a stream the server closes mid-call",
}

// serverCheck is one entry of a scenario's checks.json.
type serverCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	Description  string `json:"description"`
	ErrorMessage string `json:"errorMessage"`
}

// scenarioResult summarises one scenario of one run.
type scenarioResult struct {
	passed, failed, warnings int
	failures                 []string // "check-id: message"
}

func (r scenarioResult) ok() bool        { return r.failed == 0 && r.passed > 0 }
func (r scenarioResult) exercised() bool { return r.passed+r.failed > 0 }

// suiteRun is one run of the suite: every scenario applicable at version.
type suiteRun struct {
	name, upstream, version string // upstream "" for the direct runs
	only                    string // one scenario instead of the suite
	scenarios               map[string]scenarioResult
	wantScenarios           int
	took                    time.Duration
	transcript              string
}

func (r *suiteRun) totals() (passed, failed, okScenarios int) {
	for _, s := range r.scenarios {
		passed += s.passed
		failed += s.failed
		if s.ok() {
			okScenarios++
		}
	}
	return
}

// scenarioEnv names one scenario to run instead of the whole suite, for
// working on one relay feature: MCPX_CONFORMANCE_SCENARIO=caching make conformance.
const scenarioEnv = "MCPX_CONFORMANCE_SCENARIO"

// logEnv=1 prints each run's transcript and proxyd's log (also on with
// scenarioEnv).
const logEnv = "MCPX_CONFORMANCE_LOG"

// netnsEnv marks the test process that runs inside the private network
// namespace.
const netnsEnv = "MCPX_E2E_IN_NETNS"

// TestConformanceServerSuite runs the suite directly against the fixture
// at both spec versions and through proxyd in the four era combinations,
// all in parallel, inside a private network namespace (the suite's test
// servers bind every interface).
func TestConformanceServerSuite(t *testing.T) {
	peers := peersDir(t)
	if os.Getenv(netnsEnv) != "1" {
		runInNetns(t)
		return
	}
	start := time.Now()
	var (
		mu   sync.Mutex
		runs = map[string]*suiteRun{}
	)
	t.Run("runs", func(t *testing.T) {
		var all []*suiteRun
		only := os.Getenv(scenarioEnv)
		for _, v := range suiteVersions {
			all = append(all, &suiteRun{name: "direct/" + v, version: v, only: only})
			for _, up := range upstreamPinned {
				all = append(all, &suiteRun{name: "proxyd-" + up + "/" + v, upstream: up, version: v, only: only})
			}
		}
		for _, r := range all {
			t.Run(r.name, func(t *testing.T) {
				t.Parallel()
				runSuite(t, peers, r)
				mu.Lock()
				runs[r.name] = r
				mu.Unlock()
			})
		}
	})
	if t.Failed() {
		return
	}
	retryFailures(t, peers, runs)
	if t.Failed() {
		return
	}
	known := map[string]bool{}
	for _, v := range suiteVersions {
		for name := range runs["direct/"+v].scenarios {
			known[name] = true
		}
	}
	for _, f := range knownProxyFailures {
		if !known[f.scenario] && os.Getenv(scenarioEnv) == "" {
			t.Errorf("knownProxyFailures names %q, which the suite does not run", f.scenario)
		}
	}
	for _, v := range suiteVersions {
		direct := runs["direct/"+v]
		checkDirect(t, direct)
		for _, up := range upstreamPinned {
			checkThroughProxyd(t, direct, runs["proxyd-"+up+"/"+v])
		}
	}
	for _, name := range sortedKeys(runs) {
		{
			r := runs[name]
			passed, failed, ok := r.totals()
			t.Logf("%-22s scenarios %2d/%2d pass, checks %3d passed %2d failed (%s)", name, ok, len(r.scenarios), passed, failed, r.took.Round(100*time.Millisecond))
		}
	}
	t.Logf("server suite: %s in all", time.Since(start).Round(100*time.Millisecond))
}

// retryFailures runs each scenario that breaks the rule once more, alone,
// against a fresh fixture (and proxyd), and its whole run once more too:
// one that passes both ways is reported as flaky and counted as passing;
// one that fails again alone stays failed, and so does one that passes
// alone but fails again in its place in the suite (an earlier scenario
// left a fault behind, which a retry alone would hide).
func retryFailures(t *testing.T, peers string, runs map[string]*suiteRun) {
	t.Helper()
	type retry struct {
		run   *suiteRun
		again *suiteRun // the scenario alone
		whole *suiteRun // its run again
	}
	var retries []retry
	wholes := map[string]*suiteRun{}
	for _, name := range sortedKeys(runs) {
		r := runs[name]
		direct := runs["direct/"+r.version]
		for _, sc := range sortedKeys(r.scenarios) {
			res := r.scenarios[sc]
			_, excused := notExercisedDirectly[sc]
			_, listed := knownFailure(r.upstream, r.version, sc)
			var breaks bool
			if r.upstream == "" {
				breaks = !excused && !res.ok()
			} else {
				breaks = direct.scenarios[sc].ok() && !res.ok() && !listed
			}
			if !breaks {
				continue
			}
			if wholes[name] == nil {
				wholes[name] = &suiteRun{name: r.name + " again", upstream: r.upstream, version: r.version, only: r.only}
			}
			retries = append(retries, retry{run: r, whole: wholes[name],
				again: &suiteRun{name: r.name + " " + sc, upstream: r.upstream, version: r.version, only: sc}})
		}
	}
	if len(retries) == 0 {
		return
	}
	t.Run("retries", func(t *testing.T) {
		for _, rt := range retries {
			t.Run(rt.again.name, func(t *testing.T) {
				t.Parallel()
				runSuite(t, peers, rt.again)
			})
		}
		for _, name := range sortedKeys(wholes) {
			w := wholes[name]
			t.Run(w.name, func(t *testing.T) {
				t.Parallel()
				runSuite(t, peers, w)
			})
		}
	})
	for _, rt := range retries {
		sc := rt.again.only
		again, ok := rt.again.scenarios[sc]
		inPlace, ranInPlace := rt.whole.scenarios[sc]
		switch {
		case ok && again.ok() && ranInPlace && !inPlace.ok():
			t.Errorf("%s: %s failed twice in its place in the suite (%s; then %s) and passed alone: an earlier scenario leaves a fault behind",
				rt.run.name, sc, strings.Join(rt.run.scenarios[sc].failures, "; "), strings.Join(inPlace.failures, "; "))
		case ok && again.ok():
			t.Logf("FLAKY: %s: %s failed once (%s) and passed when run again alone and in its place", rt.run.name, sc, strings.Join(rt.run.scenarios[sc].failures, "; "))
			rt.run.scenarios[sc] = again
		case ok:
			t.Logf("%s: %s failed again when run alone (%d passed, %d failed): %s", rt.run.name, sc, again.passed, again.failed, strings.Join(again.failures, "; "))
		}
	}
}

// runInNetns runs this test again, in a private network namespace where
// only loopback exists, with the binaries already built.
func runInNetns(t *testing.T) {
	requireNetns(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	script := `ip link set lo up && exec "$@"`
	cmd := exec.CommandContext(ctx, "unshare", "-rn", "sh", "-c", script, "sh",
		os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1", "-test.timeout=9m")
	cmd.Env = append(os.Environ(), netnsEnv+"=1", "MCPX_E2E_BINDIR="+filepath.Dir(mcpxBin))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	t.Logf("in a private network namespace:\n%s", out.String())
	if ctx.Err() != nil {
		t.Fatal("the server suite did not finish within 10m")
	}
	if err != nil {
		t.Fatalf("the server suite failed: %v", err)
	}
}

// runSuite serves the fixture (and proxyd in front of it for a proxyd
// run) and runs the suite at r.version.
func runSuite(t *testing.T, peers string, r *suiteRun) {
	fx, err := conformance.Start(conformance.Options{})
	if err != nil {
		t.Fatalf("starting the conformance fixture: %v", err)
	}
	t.Cleanup(func() { _ = fx.Close() })
	target := fx.URL()
	var proxyd *proxydProc
	var e *env
	if r.upstream != "" {
		e = newEnv(t)
		// A stuck relay must fail a scenario, not hold the run: calls give
		// up well before the suite's own per-scenario timeout.
		e.writeConfig(fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: conformance\n    url: %s\n    protocol: %s\n    prefix: \"\"\n    timeout: 8s\n", fx.URL(), r.upstream))
		proxyd = e.startProxyd()
		e.waitServer("conformance", api.StateReady)
		ci := e.connectInfo()
		target = bearerForwarder(t, ci.URL, bearerHeader(ci)["Authorization"]).URL + "/mcp"
	}
	// The suite's DNS-rebinding checks want the server named localhost.
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = "localhost:" + u.Port()

	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	args := []string{"server", "--url", u.String(), "--suite", "all", "--spec-version", r.version, "--timeout", "15000", "-o", out}
	if r.only != "" {
		args = append(args, "--scenario", r.only)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(peers, nodeRel), append([]string{filepath.Join(peers, conformanceNextRel)}, args...)...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	runErr := cmd.Run() // exits 1 when a check failed; the results say which
	r.took = time.Since(start)
	r.transcript = buf.String()
	if r.only != "" && os.Getenv(scenarioEnv) != "" || os.Getenv(logEnv) == "1" {
		t.Logf("%s: the runner's output:\n%s", r.name, r.transcript)
		if proxyd != nil {
			t.Logf("%s: proxyd's log:\n%s", r.name, proxyd.stderr)
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("%s: the suite did not finish within 6m\n%s", r.name, r.transcript)
	}
	if proxyd != nil {
		// The runner has gone: nothing it opened may still be served.
		waitfor.Cond(t, 15*time.Second, r.name+": proxyd to end every stream the runner opened", func() (bool, string) {
			m := e.metrics()
			if !strings.Contains(m, `mcpx_downstream_open_streams{kind="listen"}`) {
				return false, "no mcpx_downstream_open_streams in the metrics"
			}
			open := openStreams.FindAllString(m, -1)
			return len(open) == 0, strings.Join(open, ", ")
		})
	}
	if r.only != "" {
		r.wantScenarios = 1
	} else if m := suiteSize.FindStringSubmatch(r.transcript); m != nil {
		r.wantScenarios, _ = strconv.Atoi(m[1])
	} else {
		t.Fatalf("%s: no suite size in the runner's output (%v)\n%s", r.name, runErr, r.transcript)
	}
	r.scenarios = readServerResults(t, out)
	if r.only != "" && len(r.scenarios) == 0 {
		r.wantScenarios = 0 // not applicable at this version
		return
	}
	if len(r.scenarios) != r.wantScenarios || r.wantScenarios == 0 {
		t.Fatalf("%s: %d scenario results, the runner announced %d\n%s", r.name, len(r.scenarios), r.wantScenarios, r.transcript)
	}
	if passed, _, _ := r.totals(); passed == 0 {
		t.Fatalf("%s: no check passed\n%s", r.name, r.transcript)
	}
}

// openStreams matches a non-zero count of streams proxyd's endpoint serves.
var openStreams = regexp.MustCompile(`mcpx_downstream_open_streams\{kind="\w+"\} [1-9]\d*`)

// resultDir matches the runner's per-scenario directory,
// server-<scenario>-<timestamp>.
var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T[0-9-]+Z$`)

func readServerResults(t *testing.T, out string) map[string]scenarioResult {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(out, "*", "checks.json"))
	if err != nil {
		t.Fatal(err)
	}
	res := map[string]scenarioResult{}
	for _, f := range files {
		m := resultDir.FindStringSubmatch(filepath.Base(filepath.Dir(f)))
		if m == nil {
			t.Fatalf("unexpected result directory %s", filepath.Dir(f))
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var checks []serverCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("%s: decoding checks.json: %v", m[1], err)
		}
		var r scenarioResult
		for _, c := range checks {
			switch c.Status {
			case "SUCCESS":
				r.passed++
			case "FAILURE":
				r.failed++
				r.failures = append(r.failures, c.ID+": "+c.ErrorMessage)
			case "WARNING":
				r.warnings++
			}
		}
		res[m[1]] = r
	}
	return res
}

// bearerForwarder puts the bearer on every request to target, keeping Host
// and Origin exactly as the runner sent them: the runner has no header
// option, and the endpoint must keep its own Host/Origin checks.
func bearerForwarder(t *testing.T, target, authorization string) *httptest.Server {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatalf("parsing %s: %v", target, err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = u.Scheme
			pr.Out.URL.Host = u.Host
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set("Authorization", authorization)
		},
		FlushInterval: -1, // stream SSE responses as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			t.Logf("bearer forwarder: %s %s: %v", r.Method, r.URL.Path, err)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	// One connection per request from the runner: its fetch client cancels
	// an SSE body as soon as it holds the response, and on a kept-alive
	// connection that now and then cuts the runner's next request short
	// inside ReverseProxy (measured: 10 of 300 sequential progress calls
	// against the fixture itself, none with one connection per request,
	// none straight to proxyd). Seen as "terminated", "no result in
	// response body" or a scenario timeout, it is no fault of proxyd's.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// checkDirect: the fixture passes every scenario, apart from those whose
// checks do not apply to it.
func checkDirect(t *testing.T, r *suiteRun) {
	t.Helper()
	for _, name := range sortedKeys(r.scenarios) {
		s := r.scenarios[name]
		_, excused := notExercisedDirectly[name]
		switch {
		case excused && s.exercised():
			t.Errorf("%s: %s now reports checks (%d passed, %d failed): remove it from notExercisedDirectly", r.name, name, s.passed, s.failed)
		case !excused && !s.ok():
			t.Errorf("%s: %s fails against the fixture itself (%d passed, %d failed): %s", r.name, name, s.passed, s.failed, strings.Join(s.failures, "; "))
		}
	}
}

// knownFailure returns the reason a scenario is listed for a run.
func knownFailure(upstream, version, scenario string) (string, bool) {
	return match(knownProxyFailures, upstream, version, scenario)
}

func match(list []proxyFailure, upstream, version, scenario string) (string, bool) {
	for _, f := range list {
		if f.scenario == scenario && (f.upstream == "*" || f.upstream == upstream) && (f.version == "*" || f.version == version) {
			return f.reason, true
		}
	}
	return "", false
}

// checkThroughProxyd applies the rule to one proxyd run.
func checkThroughProxyd(t *testing.T, direct, r *suiteRun) {
	t.Helper()
	for _, name := range sortedKeys(direct.scenarios) {
		d, p := direct.scenarios[name], r.scenarios[name]
		reason, listed := knownFailure(r.upstream, r.version, name)
		switch {
		case !d.ok() && listed:
			t.Errorf("%s: %s is listed as failing through proxyd but does not pass directly either: fix the list", r.name, name)
		case !d.ok():
		case p.ok() && listed:
			t.Errorf("%s: %s passes through proxyd now (%d checks): remove it from knownProxyFailures (%s)", r.name, name, p.passed, reason)
		case !p.ok() && !listed:
			t.Errorf("%s: %s passes directly but fails through proxyd (%d passed, %d failed): %s", r.name, name, p.passed, p.failed, strings.Join(p.failures, "; "))
		case !p.ok():
			t.Logf("%s: %s fails through proxyd as listed (%s): %s", r.name, name, reason, strings.Join(p.failures, "; "))
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestForwarderCompletesStreams: the runner's way of reading answers
// (fetch, an SSE body cancelled once it holds the response), through the
// bearer forwarder to proxyd, call after call: every answer completes. A
// harness that cuts answers short would blame proxyd for it.
func TestForwarderCompletesStreams(t *testing.T) {
	peers := peersDir(t)
	fx, err := mcpserver.Start(mcpserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fx.Close() })
	e := newEnv(t)
	e.writeConfig(fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: fx\n    url: %s\n    prefix: \"\"\n", fx.URL()))
	e.startProxyd()
	e.waitServer("fx", api.StateReady)
	ci := e.connectInfo()
	target := bearerForwarder(t, ci.URL, bearerHeader(ci)["Authorization"]).URL + "/mcp"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const calls = 500
	cmd := exec.CommandContext(ctx, filepath.Join(peers, nodeRel), filepath.Join("testdata", "sequential_streams.mjs"), target, mcpserver.ToolProgress, strconv.Itoa(calls))
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the client script: %v\n%s", err, out)
	}
	var res struct {
		Calls, Incomplete int
		First             string
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil {
		t.Fatalf("the client script's report %q: %v", out, err)
	}
	if res.Calls != calls || res.Incomplete > 0 {
		t.Fatalf("%d of %d answers did not complete through the forwarder; first: %s", res.Incomplete, res.Calls, res.First)
	}
}
