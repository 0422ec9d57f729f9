package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The conformance adapter (tools/conformance/mcpx-client), built once.
var (
	adapterOnce sync.Once
	adapterBin  string
	adapterErr  error
)

func conformanceAdapter(t *testing.T) string {
	t.Helper()
	adapterOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcpx-e2e-adapter-")
		if err != nil {
			adapterErr = err
			return
		}
		adapterBin = filepath.Join(dir, "mcpx-client")
		adapterErr = goBuild("./tools/conformance/mcpx-client", adapterBin)
	})
	if adapterErr != nil {
		t.Fatalf("building the conformance adapter: %v", adapterErr)
	}
	return adapterBin
}

// requireNetns checks that a private network namespace can be made: the
// suite's servers bind every interface, and inside the namespace only its
// loopback exists.
func requireNetns(t *testing.T) {
	t.Helper()
	out, err := exec.Command("unshare", "-rn", "sh", "-c", "ip link set lo up").CombinedOutput()
	if err == nil {
		return
	}
	msg := "cannot create a private network namespace (unshare -rn, ip link set lo up): " + err.Error() + ": " + strings.TrimSpace(string(out))
	if os.Getenv("MCPX_REQUIRE_PEERS") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// suiteSize matches the runner's "Running all suite (48 scenarios)".
var suiteSize = regexp.MustCompile(`Running \S+ suite \((\d+) scenarios\)`)

// listedScenario is a line of `conformance list`: "  - NAME [VERSIONS]".
var listedScenario = regexp.MustCompile(`^\s+- (\S+) \[([^\]]*)\]\s*$`)

// clientScenario is one client scenario and the revisions it applies to.
type clientScenario struct {
	name     string
	versions []string
}

// listClientScenarios reads the suite's client scenarios from its list.
func listClientScenarios(t *testing.T, node, runner string) []clientScenario {
	t.Helper()
	out, err := exec.Command(node, runner, "list").CombinedOutput()
	if err != nil {
		t.Fatalf("conformance list: %v\n%s", err, out)
	}
	var list []clientScenario
	in := false
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "Client scenarios"):
			in = true
		case in && strings.TrimSpace(line) != "" && !strings.HasPrefix(line, " "):
			in = false
		case in:
			if m := listedScenario.FindStringSubmatch(line); m != nil {
				list = append(list, clientScenario{name: m[1], versions: strings.Split(m[2], ",")})
			}
		}
	}
	if len(list) == 0 {
		t.Fatalf("no client scenarios in the suite's list:\n%s", out)
	}
	return list
}

// clientCheck is one entry of a client scenario's checks.json.
type clientCheck struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Status       string `json:"status"`
	Description  string `json:"description"`
	ErrorMessage string `json:"errorMessage"`
}

// modern is the revision whose scenarios also run on its own wire.
const modern = "2026-07-28"

// pendingClientScenarios fail today, each for the reason given; they are
// reported and not judged (one that passes says so, to leave this list).
// A key is a scenario, or scenario@run for one run only.
var pendingClientScenarios = map[string]string{}

// clientJob is one scenario run: at the scenario's default revision
// ("default"), or on the 2026-07-28 wire.
type clientJob struct {
	run, scenario string
	out           string
	transcript    string
	err           error
	took          time.Duration
}

// clientParallel is how many scenarios run at once: each starts a proxyd
// and many mcpx commands, and a machine of two cores given them all at
// once answers too slowly for connection timeouts.
const clientParallel = 8

// TestConformanceClientSuites runs every client scenario of the official
// MCP conformance suite with mcpx as the client: each at its default
// revision (2025-11-25 for those of both revisions, the 2025-03-26
// back-compatibility ones, the extensions), and again on the 2026-07-28
// wire (stateless requests, per-request _meta) every one that also applies
// to an earlier revision. The adapter starts a real proxyd and drives the
// real CLI. Every scenario must pass with at least one successful check.
func TestConformanceClientSuites(t *testing.T) {
	peers := peersDir(t)
	requireNetns(t)
	adapter := conformanceAdapter(t)
	node := filepath.Join(peers, nodeRel)
	runner := filepath.Join(peers, conformanceNextRel)
	var jobs []*clientJob
	for _, sc := range listClientScenarios(t, node, runner) {
		jobs = append(jobs, &clientJob{run: "default", scenario: sc.name})
		if slices.Contains(sc.versions, modern) && len(sc.versions) > 1 {
			jobs = append(jobs, &clientJob{run: modern, scenario: sc.name})
		}
	}
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	work := make(chan *clientJob)
	var wg sync.WaitGroup
	for range clientParallel {
		wg.Go(func() {
			for j := range work {
				j.out, _ = os.MkdirTemp(root, "run-")
				args := "--scenario " + j.scenario
				if j.run == modern {
					args += " --spec-version " + modern
				}
				script := `ip link set lo up && exec "$0" "$1" client --command "$2" ` + args + ` --timeout 60000 -o "$3"`
				cmd := exec.CommandContext(ctx, "unshare", "-rn", "sh", "-c", script, node, runner, adapter, j.out)
				cmd.Env = append(os.Environ(), "MCPX_BIN="+mcpxBin, "NO_COLOR=1", "MCPX_CLIENT_LOG=1")
				var buf bytes.Buffer
				cmd.Stdout, cmd.Stderr = &buf, &buf
				cmd.WaitDelay = 10 * time.Second
				start := time.Now()
				j.err = cmd.Run()
				j.took = time.Since(start)
				j.transcript = buf.String()
			}
		})
	}
	for _, j := range jobs {
		work <- j
	}
	close(work)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the client scenarios did not finish within 8m")
	}
	passedTotal := map[string]int{}
	for _, j := range jobs {
		t.Run(j.run+"/"+j.scenario, func(t *testing.T) {
			passedTotal[j.run] += judgeClientScenario(t, j)
		})
	}
	t.Logf("%d scenario runs; checks passed: %v", len(jobs), passedTotal)
}

// judgeClientScenario reads one run's checks.json and reports what
// failed; it returns the checks that passed.
func judgeClientScenario(t *testing.T, j *clientJob) int {
	files, _ := filepath.Glob(filepath.Join(j.out, "*", "checks.json"))
	nested, _ := filepath.Glob(filepath.Join(j.out, "*", "*", "checks.json"))
	files = append(files, nested...)
	if len(files) != 1 {
		t.Fatalf("%d results for %s, want 1 (%v)\n%s", len(files), j.scenario, j.err, j.transcript)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var checks []clientCheck
	if err := json.Unmarshal(b, &checks); err != nil {
		t.Fatalf("decoding checks.json: %v", err)
	}
	passed := 0
	var bad []string
	for _, c := range checks {
		switch c.Status {
		case "SUCCESS":
			passed++
		case "FAILURE", "WARNING":
			bad = append(bad, fmt.Sprintf("%s %s: %s %s", c.Status, c.Name, c.Description, c.ErrorMessage))
		}
	}
	if passed == 0 {
		bad = append(bad, "no successful check (a client that does nothing passes with 0)")
	}
	why, ok := pendingClientScenarios[j.scenario+"@"+j.run]
	if !ok {
		why, ok = pendingClientScenarios[j.scenario]
	}
	switch {
	case ok && len(bad) == 0:
		t.Logf("PASSES NOW (%d checks): remove it from pendingClientScenarios", passed)
	case ok:
		t.Logf("pending (%s): %d checks passed, %d not", why, passed, len(bad))
		return 0
	case len(bad) > 0:
		for _, msg := range bad {
			t.Error(msg)
		}
		// What the adapter and proxyd did, for the diagnosis.
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(files[0]), "stderr.txt")); err == nil {
			t.Logf("adapter transcript:\n%s", b)
		}
		t.Logf("runner output:\n%s", j.transcript)
	default:
		t.Logf("%d checks passed in %s", passed, j.took.Round(time.Millisecond))
	}
	return passed
}
