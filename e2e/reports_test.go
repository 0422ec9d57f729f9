package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/fixtures/tlsfixtures"
)

// sarifToleratedWarnings are the validator's warnings mcpx's logs may
// carry: a development build's version is not numeric (SARIF2005), and a
// finding located at a URL has no line region (SARIF2017).
var sarifToleratedWarnings = []string{"SARIF2005", "SARIF2017"}

// validateSARIF checks file with Microsoft's SARIF multitool (the schema
// and its rules): no error, no warning beyond the tolerated ones.
func validateSARIF(t *testing.T, file string) {
	t.Helper()
	tool := filepath.Join(peersDir(t), "node_modules", ".bin", "sarif-multitool")
	out := filepath.Join(t.TempDir(), "validation.sarif")
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	b, err := exec.CommandContext(ctx, tool, "validate", file, "-o", out).CombinedOutput()
	if err != nil {
		t.Fatalf("sarif-multitool validate %s: %v\n%s", file, err, b)
	}
	var log struct {
		Runs []struct {
			Results []struct {
				RuleID  string `json:"ruleId"`
				Level   string `json:"level"`
				Message struct {
					Arguments []string `json:"arguments"`
				} `json:"message"`
			} `json:"results"`
		} `json:"runs"`
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("reading the validator's log: %v\n%s", err, b)
	}
	if err := json.Unmarshal(raw, &log); err != nil {
		t.Fatalf("decoding the validator's log: %v", err)
	}
	for _, run := range log.Runs {
		for _, r := range run.Results {
			if r.Level == "error" || !slices.Contains(sarifToleratedWarnings, r.RuleID) {
				t.Errorf("SARIF validation of %s: %s %s %v\n%s", file, r.Level, r.RuleID, r.Message.Arguments, b)
			}
		}
	}
}

// junitView is what a CI reporter reads from a JUnit report.
type junitView struct {
	Total, Passed, Failed, Skipped int
	Status                         string
	Suites                         []struct {
		Name                           string
		Total, Passed, Failed, Skipped int
		Cases                          []struct {
			Name, Status, Failure string
		}
	}
}

// readJUnit reads file with test-results-parser (tools/peers/junit-read.js)
// and checks that its totals agree with its cases.
func readJUnit(t *testing.T, file string) junitView {
	t.Helper()
	dir := peersDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, nodeRel), filepath.Join(dir, "junit-read.js"), file)
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("reading %s as JUnit: %v\n%s", file, err, b)
	}
	var v junitView
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding the reader's view: %v\n%s", err, b)
	}
	for _, s := range v.Suites {
		count := map[string]int{}
		for _, c := range s.Cases {
			count[c.Status]++
		}
		if count["FAIL"] != s.Failed || count["SKIP"] != s.Skipped || count["PASS"] != s.Passed {
			t.Errorf("suite %s: totals %d passed / %d failed / %d skipped, cases say %v", s.Name, s.Passed, s.Failed, s.Skipped, count)
		}
	}
	return v
}

// writeOut saves a command's stdout for the validators.
func writeOut(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The probe's SARIF passes Microsoft's validator and its JUnit reads in a
// CI reporter as one suite per target with one case per step.
func TestProbeReportsValidate(t *testing.T) {
	e := newEnv(t)
	var urls []string
	ca := ""
	for _, kind := range []string{tlsfixtures.KindOK, tlsfixtures.KindAuthOK, tlsfixtures.KindRefused, tlsfixtures.KindExpired, tlsfixtures.KindExpiringSoon} {
		f, err := tlsfixtures.Start(kind)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		t.Cleanup(f.Close)
		urls = append(urls, f.URL)
		if f.CAFile != "" {
			ca = f.CAFile
		}
	}
	args := append([]string{"probe", "--ca-file", ca, "--timeout", "5s"}, urls...)

	r := e.run(append(args, "-o", "sarif")...)
	if r.code != 19 {
		t.Fatalf("want exit 19 (two targets fail):\n%s", r)
	}
	validateSARIF(t, writeOut(t, "probe.sarif", r.stdout))
	for _, rule := range []string{`"MCPX1004"`, `"MCPX1006"`, `"MCPX2003"`} {
		if !strings.Contains(r.stdout, rule) {
			t.Errorf("SARIF lacks rule %s:\n%s", rule, r.stdout)
		}
	}

	r = e.run(append(args, "-o", "junit", "--fail-on", "warn")...)
	v := readJUnit(t, writeOut(t, "probe.xml", r.stdout))
	if len(v.Suites) != 5 || v.Status != "FAIL" {
		t.Fatalf("want five suites and a failed run: %+v", v)
	}
	// Per target: six steps and the outcome. Failed cases: refused (tcp,
	// outcome), expired (tls, outcome), expiring-soon's tls warning.
	failed := map[string][]string{}
	for _, s := range v.Suites {
		if len(s.Cases) != 7 {
			t.Errorf("suite %s has %d cases, want 7", s.Name, len(s.Cases))
		}
		for _, c := range s.Cases {
			if c.Status == "FAIL" {
				failed[s.Name] = append(failed[s.Name], c.Name)
			}
		}
	}
	want := map[string][]string{urls[2]: {"tcp", "outcome"}, urls[3]: {"tls", "outcome"}, urls[4]: {"tls"}}
	for u, cases := range want {
		if !slices.Equal(failed[u], cases) {
			t.Errorf("%s: failed cases %v, want %v", u, failed[u], cases)
		}
	}
	if len(failed) != len(want) {
		t.Errorf("failed cases %v, want %v", failed, want)
	}
}

// Drill verdicts in the report formats: a PASS has no finding, a FAIL one
// per failed check, located at the server's URL, and annotated in GitHub
// Actions.
func TestDrillReportsValidate(t *testing.T) {
	e, _ := fixtureEnv(t, mcpserver.EraLegacy, "legacy")
	r := e.run("drill", "session", "fixture", "--calls", "5", "-o", "sarif")
	if r.code != 0 {
		t.Fatalf("session drill on a good server:\n%s", r)
	}
	validateSARIF(t, writeOut(t, "session.sarif", r.stdout))
	if strings.Contains(r.stdout, `"ruleId"`) {
		t.Fatalf("a passing drill has no findings:\n%s", r.stdout)
	}
	r = e.run("drill", "session", "fixture", "--calls", "5", "-o", "junit")
	if v := readJUnit(t, writeOut(t, "session.xml", r.stdout)); v.Status != "PASS" || v.Total != 4 {
		t.Fatalf("session drill as JUnit: %+v", v)
	}

	fx := startAuthFixture(t)
	o := newOAuthEnv(t)
	o.writeConfig(oauthConfig("docs", fx.MCP, ""))
	o.up()
	o.mustRun("login", "docs")
	o.waitReady("docs")
	r = o.run("drill", "refresh", "docs", "--callers", "5", "-o", "sarif")
	if r.code != 0 {
		t.Fatalf("refresh drill:\n%s", r)
	}
	validateSARIF(t, writeOut(t, "refresh-pass.sarif", r.stdout))

	failRefresh(t, fx, "invalid_grant")
	o.extraEnv = append(o.extraEnv, "GITHUB_ACTIONS=true")
	r = o.run("drill", "refresh", "docs", "--callers", "5", "-o", "sarif")
	if r.code != 5 {
		t.Fatalf("refresh drill against a refusing server: want exit 5:\n%s", r)
	}
	validateSARIF(t, writeOut(t, "refresh-fail.sarif", r.stdout))
	if !strings.Contains(r.stdout, `"MCPX3103"`) || !strings.Contains(r.stdout, fx.MCP) {
		t.Fatalf("want the lost grant located at the server's URL:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "::error title=RefreshGrantLost (MCPX3103)::docs: grant:") {
		t.Fatalf("no GitHub annotation:\n%s", r.stderr)
	}
	r = o.run("drill", "refresh", "docs", "--callers", "5", "-o", "junit")
	v := readJUnit(t, writeOut(t, "refresh.xml", r.stdout))
	var names []string
	for _, c := range v.Suites[0].Cases {
		names = append(names, c.Name+"="+c.Status)
	}
	if v.Status != "FAIL" || !slices.Contains(names, "grant=FAIL") || !slices.Contains(names, "outcome=FAIL") {
		t.Fatalf("refresh drill as JUnit: %v", names)
	}
}
