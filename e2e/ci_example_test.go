package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// ciWorkflow is the part of a GitHub Actions workflow the test runs.
type ciWorkflow struct {
	Jobs map[string]struct {
		Env   map[string]string `yaml:"env"`
		Steps []struct {
			Name string            `yaml:"name"`
			Uses string            `yaml:"uses"`
			Run  string            `yaml:"run"`
			Env  map[string]string `yaml:"env"`
			If   string            `yaml:"if"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

var ciExpr = regexp.MustCompile(`\$\{\{\s*([^}]+?)\s*\}\}`)

// TestCIExample runs the documented workflow's shell steps, as written,
// against loopback fixtures: install (the test's binary on PATH), probe
// from the targets file, proxyd up, a headless sign-in, both drills, down;
// then checks every SARIF it wrote with Microsoft's validator.
func TestCIExample(t *testing.T) {
	raw, err := os.ReadFile("../docs/ci/github-actions.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf ciWorkflow
	if err := yaml.Unmarshal(raw, &wf); err != nil {
		t.Fatalf("the example workflow is not valid YAML: %v", err)
	}
	job, ok := wf.Jobs["mcp-smoke"]
	if !ok {
		t.Fatalf("no job mcp-smoke in the example")
	}

	// The endpoints: an OAuth-protected server, a session server, and one
	// that wants a static bearer token.
	const reportsToken = "canary-ci-reports-token-4242"
	docs := startAuthFixture(t)
	search := startFixtureProcess(t, "--era", "legacy")
	reports := startFixtureProcess(t, "--bearer", reportsToken)
	urls := map[string]string{
		"https://docs.example.com/mcp":    docs.MCP,
		"https://search.example.com/mcp":  search,
		"https://reports.example.com/mcp": reports,
	}

	e := newEnv(t)
	work := filepath.Join(e.dir, "repo")
	bin := filepath.Join(e.dir, "bin")
	for _, d := range []string{filepath.Join(work, ".github", "mcpx"), bin} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"config.yaml", "targets.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "docs", "ci", name))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for from, to := range urls {
			s = strings.ReplaceAll(s, from, to)
		}
		if name == "config.yaml" {
			s = "listen: 127.0.0.1:0\n" + s // tests never take the fixed port
		}
		if err := os.WriteFile(filepath.Join(work, ".github", "mcpx", name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(mcpxBin, filepath.Join(bin, "mcpx")); err != nil {
		t.Fatal(err)
	}

	expand := func(s string) string {
		return ciExpr.ReplaceAllStringFunc(s, func(m string) string {
			switch expr := ciExpr.FindStringSubmatch(m)[1]; expr {
			case "runner.temp":
				return e.dir
			case "secrets.REPORTS_TOKEN":
				return reportsToken
			default:
				t.Fatalf("the example uses %s, which this test cannot provide", m)
				return ""
			}
		})
	}
	base := []string{"GITHUB_ACTIONS=true"}
	for _, kv := range e.environ() {
		if strings.HasPrefix(kv, "PATH=") {
			kv = "PATH=" + bin + ":" + strings.TrimPrefix(kv, "PATH=")
		}
		base = append(base, kv)
	}
	for k, v := range job.Env {
		base = append(base, k+"="+expand(v))
	}
	var down []string
	t.Cleanup(func() {
		if down != nil {
			cmd := exec.Command("mcpx", "down")
			cmd.Env, cmd.Dir = down, work
			_ = cmd.Run()
		}
	})

	ran := 0
	var outputs bytes.Buffer
	for _, st := range job.Steps {
		if st.Run == "" {
			continue // actions (checkout, setup-go, upload-sarif) are GitHub's
		}
		if strings.HasPrefix(st.Name, "Install mcpx") {
			if !strings.Contains(st.Run, "go install github.com/mcpx-dev/mcpx/cmd/mcpx@") {
				t.Fatalf("the install step does not install mcpx: %q", st.Run)
			}
			continue // the binary under test is on PATH instead
		}
		env := append([]string(nil), base...)
		for k, v := range st.Env {
			env = append(env, k+"="+expand(v))
		}
		down = env
		ctx, cancel := context.WithTimeout(context.Background(), 2*runTimeout)
		// GitHub's default shell for run steps on Linux.
		cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", expand(st.Run))
		cmd.Env, cmd.Dir = env, work
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		outputs.Write(out.Bytes())
		if err != nil {
			t.Fatalf("step %q failed: %v\n%s", st.Name, err, out.String())
		}
		ran++
	}
	if ran < 6 {
		t.Fatalf("only %d run steps in the example", ran)
	}
	if strings.Contains(outputs.String(), reportsToken) {
		t.Fatal("the bearer token given by reference was printed")
	}
	reportsDir := filepath.Join(work, "mcpx-reports")
	for _, name := range []string{"probe.sarif", "drill-refresh.sarif", "drill-session.sarif"} {
		p := filepath.Join(reportsDir, name)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("the example wrote no %s: %v", name, err)
		}
		validateSARIF(t, p, true)
		if strings.Contains(string(b), `"ruleId"`) {
			t.Errorf("%s has findings against healthy fixtures:\n%s", name, b)
		}
	}
}
