package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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

// suiteSize matches the runner's "Running auth suite (14 scenarios)".
var suiteSize = regexp.MustCompile(`Running \S+ suite \((\d+) scenarios\)`)

// clientCheck is one entry of a client scenario's checks.json.
type clientCheck struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Status       string `json:"status"`
	Description  string `json:"description"`
	ErrorMessage string `json:"errorMessage"`
}

// TestConformanceClientSuites runs the official MCP conformance suite's
// client scenarios (suites auth, backcompat, draft) with mcpx as the
// client: the adapter starts a real proxyd and drives the real CLI. Every
// scenario must pass with at least one successful check.
func TestConformanceClientSuites(t *testing.T) {
	peers := peersDir(t)
	requireNetns(t)
	adapter := conformanceAdapter(t)
	node := filepath.Join(peers, nodeRel)
	runner := filepath.Join(peers, conformanceRel)
	for _, suite := range []string{"auth", "backcompat", "draft"} {
		t.Run(suite, func(t *testing.T) {
			out := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			script := `ip link set lo up && exec "$0" "$1" client --command "$2" --suite "$3" --timeout 60000 -o "$4" --verbose`
			cmd := exec.CommandContext(ctx, "unshare", "-rn", "sh", "-c", script, node, runner, adapter, suite, out)
			cmd.Env = append(os.Environ(), "MCPX_BIN="+mcpxBin, "NO_COLOR=1")
			var buf bytes.Buffer
			cmd.Stdout, cmd.Stderr = &buf, &buf
			cmd.WaitDelay = 10 * time.Second
			runErr := cmd.Run()
			transcript := buf.String()
			if ctx.Err() != nil {
				t.Fatalf("the %s suite did not finish within 4m\n%s", suite, transcript)
			}
			m := suiteSize.FindStringSubmatch(transcript)
			if m == nil {
				t.Fatalf("no suite size in the runner's output (%v)\n%s", runErr, transcript)
			}
			want, _ := strconv.Atoi(m[1])
			if want == 0 {
				t.Fatalf("the %s suite has no scenarios\n%s", suite, transcript)
			}
			files, err := filepath.Glob(filepath.Join(out, "*", "*", "checks.json"))
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != want {
				t.Errorf("%d scenario results, want %d\n%s", len(files), want, transcript)
			}
			total := 0
			for _, f := range files {
				scenario := filepath.Base(filepath.Dir(filepath.Dir(f))) + "/" + filepath.Base(filepath.Dir(f))
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				var checks []clientCheck
				if err := json.Unmarshal(b, &checks); err != nil {
					t.Fatalf("%s: decoding checks.json: %v", scenario, err)
				}
				passed := 0
				for _, c := range checks {
					switch c.Status {
					case "SUCCESS":
						passed++
					case "FAILURE", "WARNING":
						t.Errorf("%s: %s %s: %s %s", scenario, c.Status, c.Name, c.Description, c.ErrorMessage)
					}
				}
				if passed == 0 {
					t.Errorf("%s: no successful check (a client that does nothing passes with 0)", scenario)
				}
				total += passed
				t.Logf("%s: %d checks passed", scenario, passed)
			}
			if runErr != nil {
				t.Errorf("the runner failed: %v", runErr)
			}
			if t.Failed() {
				t.Logf("runner output:\n%s", transcript)
			}
			t.Logf("suite %s: %d scenarios, %d checks passed", suite, len(files), total)
		})
	}
}
