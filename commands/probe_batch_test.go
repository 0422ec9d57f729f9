package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/tlsfixtures"
	"github.com/mcpx-dev/mcpx/probe"
)

// runWithConfig runs the app in-process with cfg as the config file and
// no proxyd.
func runWithConfig(t *testing.T, cfg string, args ...string) (string, string, int) {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	app := New(&stdout, &stderr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	full := append([]string{"mcpx", "--socket", filepath.Join(dir, "none.sock"), "--config", cfgPath}, args...)
	err := app.RunContext(ctx, normalizeArgs(app, full))
	if err != nil && !IsSilent(err) {
		stderr.WriteString("mcpx: " + err.Error() + "\n")
	}
	return stdout.String(), stderr.String(), ExitCode(err)
}

func decodeBatch(t *testing.T, stdout string) probe.Batch {
	t.Helper()
	var b probe.Batch
	if err := json.Unmarshal([]byte(stdout), &b); err != nil {
		t.Fatalf("stdout is not a batch: %v\n%s", err, stdout)
	}
	return b
}

func TestProbeSeveralTargets(t *testing.T) {
	ok := startFixture(t, tlsfixtures.KindOK)
	auth := startFixture(t, tlsfixtures.KindAuthOK)
	refused := startFixture(t, tlsfixtures.KindRefused)
	ca := ok.CAFile // the fixtures share one CA

	stdout, stderr, code := runMCPX(t, "", "probe", ok.URL, auth.URL, refused.URL, "--ca-file", ca, "-o", "json")
	if code != ExitProbeTargets {
		t.Fatalf("exit %d, want %d; stderr %s", code, ExitProbeTargets, stderr)
	}
	b := decodeBatch(t, stdout)
	if s := b.Summary; s.Targets != 3 || s.Passed != 2 || s.Failed != 1 || s.FailOn != "fail" {
		t.Fatalf("summary %+v", s)
	}
	if b.Targets[2].Passed || b.Targets[2].Report.Result.Code != probe.CodeConnectionUnreachable || !strings.Contains(b.Targets[2].Why, "connection_unreachable") {
		t.Fatalf("refused target %+v", b.Targets[2])
	}
	if strings.Count(stderr, "ran in-process") != 1 {
		t.Fatalf("where the probes ran is said once: %q", stderr)
	}

	// The table: one line per target, the failed one explained, a summary.
	stdout, _, code = runMCPX(t, "", "probe", ok.URL, refused.URL, "--ca-file", ca)
	if code != ExitProbeTargets || !strings.Contains(stdout, "TARGET") || !strings.Contains(stdout, "2 targets: 1 passed, 1 failed") ||
		!strings.Contains(stdout, "hint:") {
		t.Fatalf("exit %d, table:\n%s", code, stdout)
	}

	// Expecting the failure makes it a pass.
	_, stderr, code = runMCPX(t, "", "probe", refused.URL, "--expect", "connection_unreachable")
	if code != 0 {
		t.Fatalf("expected failure: exit %d; %s", code, stderr)
	}
	// Expecting something else fails with the batch code, not the class.
	stdout, _, code = runMCPX(t, "", "probe", ok.URL, "--ca-file", ca, "--expect", "auth_required")
	if code != ExitProbeTargets || !strings.Contains(stdout, "expect: expected auth_required, got ok") {
		t.Fatalf("unmet expectation: exit %d\n%s", code, stdout)
	}
	// One failing URL alone keeps its class's exit code.
	if _, _, code = runMCPX(t, "", "probe", refused.URL); code != 13 {
		t.Fatalf("single target: exit %d, want 13", code)
	}
	if _, stderr, code = runMCPX(t, "", "probe", ok.URL, "--expect", "bogus"); code != ExitUsage || !strings.Contains(stderr, "not a probe result code") {
		t.Fatalf("bad --expect: %d %s", code, stderr)
	}
}

func TestProbeFailOnWarn(t *testing.T) {
	f := startFixture(t, tlsfixtures.KindExpiringSoon)
	if _, stderr, code := runMCPX(t, "", "probe", f.URL, "--ca-file", f.CAFile); code != 0 {
		t.Fatalf("a warning passes by default: exit %d %s", code, stderr)
	}
	stdout, _, code := runMCPX(t, "", "probe", f.URL, "--ca-file", f.CAFile, "--fail-on", "warn", "-o", "junit")
	if code != ExitProbeTargets {
		t.Fatalf("--fail-on warn: exit %d", code)
	}
	var suites struct {
		Suites []struct {
			Failures int `xml:"failures,attr"`
			Cases    []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(stdout), &suites); err != nil {
		t.Fatalf("junit: %v\n%s", err, stdout)
	}
	if len(suites.Suites) != 1 || suites.Suites[0].Failures != 1 {
		t.Fatalf("want the tls warning as the one failure:\n%s", stdout)
	}
	for _, c := range suites.Suites[0].Cases {
		if (c.Failure != nil) != (c.Name == "tls") {
			t.Fatalf("case %s failure=%v\n%s", c.Name, c.Failure != nil, stdout)
		}
	}
	if _, _, code := runMCPX(t, "", "probe", f.URL, "--fail-on", "sometimes"); code != ExitUsage {
		t.Fatalf("bad --fail-on: exit %d", code)
	}
}

func TestProbeTargetsFile(t *testing.T) {
	const canary = "canary-targets-header-5150"
	ok := startFixture(t, tlsfixtures.KindOK)
	auth := startFixture(t, tlsfixtures.KindAuthOK)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "key"), []byte(canary+"-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	caRel, err := filepath.Rel(dir, ok.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("MCPX_TEST_TARGET_KEY", canary)
	file := filepath.Join(dir, "targets.yaml")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`targets:
  - url: ` + ok.URL + `
    name: plain
    ca_file: ` + caRel + `
    headers:
      X-Api-Key: "${env:MCPX_TEST_TARGET_KEY}"
      Authorization: "Bearer ${file:key}"
  - server: docs
    expect: auth_required
`)
	cfg := "servers:\n  - name: docs\n    url: " + auth.URL + "\n    tls: {ca_file: " + auth.CAFile + "}\n"
	for _, format := range []string{"json", "table", "sarif", "junit", "yaml"} {
		stdout, stderr, code := runWithConfig(t, cfg, "probe", "--file", file, "-o", format)
		if code != 0 {
			t.Fatalf("-o %s: exit %d\n%s\n%s", format, code, stdout, stderr)
		}
		if strings.Contains(stdout+stderr, canary) {
			t.Fatalf("-o %s: a header value by reference was printed:\n%s%s", format, stdout, stderr)
		}
		if format == "json" {
			b := decodeBatch(t, stdout)
			if b.Targets[0].Name != "plain" || b.Targets[1].Name != "docs" || b.Targets[1].Expect != probe.CodeAuthRequired {
				t.Fatalf("targets %+v", b.Targets)
			}
		}
	}

	bad := []struct{ file, want string }{
		{"targets:\n  - url: " + ok.URL + "\n    headers: {X: \"${env:MCPX_TEST_UNSET_VAR}\"}\n", "MCPX_TEST_UNSET_VAR"},
		{"targets:\n  - url: " + ok.URL + "\n    hedaers: {}\n", "targets.yaml:3"},
		{"targets:\n  - name: nothing\n", "either url or server"},
		{"targets:\n  - url: " + ok.URL + "\n    expect: fine\n", "not a probe result code"},
		{"targets: []\n", "no targets"},
	}
	for _, tt := range bad {
		write(tt.file)
		_, stderr, code := runWithConfig(t, cfg, "probe", "--file", file)
		if code != ExitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("file %q: exit %d, stderr %q; want usage error naming %q", tt.file, code, stderr, tt.want)
		}
	}
}

func TestProbeAll(t *testing.T) {
	ok := startFixture(t, tlsfixtures.KindOK)
	refused := startFixture(t, tlsfixtures.KindRefused)
	cfg := "servers:\n  - name: good\n    url: " + ok.URL + "\n    tls: {ca_file: " + ok.CAFile + "}\n" +
		"  - name: down\n    url: " + refused.URL + "\n" +
		"  - name: local\n    command: /bin/true\n"
	stdout, stderr, code := runWithConfig(t, cfg, "probe", "--all", "--parallel", "2", "-o", "json")
	if code != ExitProbeTargets {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	b := decodeBatch(t, stdout)
	if len(b.Targets) != 2 || b.Targets[0].Name != "good" || !b.Targets[0].Passed || b.Targets[1].Passed {
		t.Fatalf("targets %+v", b.Targets)
	}
	if !strings.Contains(stderr, "skipping local") {
		t.Fatalf("the stdio server is skipped with a note: %q", stderr)
	}
	if _, _, code := runWithConfig(t, cfg, "probe", "--all", "--parallel", "0"); code != ExitUsage {
		t.Fatalf("--parallel 0: exit %d", code)
	}
}

func TestProbeSARIFAndAnnotations(t *testing.T) {
	ok := startFixture(t, tlsfixtures.KindOK)
	refused := startFixture(t, tlsfixtures.KindRefused)
	expired := startFixture(t, tlsfixtures.KindExpired)
	t.Setenv("GITHUB_ACTIONS", "true")
	stdout, stderr, code := runMCPX(t, "", "probe", ok.URL, refused.URL, expired.URL, "--ca-file", ok.CAFile, "-o", "sarif")
	if code != ExitProbeTargets {
		t.Fatalf("exit %d", code)
	}
	var log struct {
		Version string `json:"version"`
		Runs    []struct {
			Tool struct {
				Driver struct {
					Rules []struct {
						ID string `json:"id"`
					} `json:"rules"`
				} `json:"driver"`
			} `json:"tool"`
			Results []struct {
				RuleID    string `json:"ruleId"`
				RuleIndex int    `json:"ruleIndex"`
				Level     string `json:"level"`
				Locations []struct {
					PhysicalLocation *struct{} `json:"physicalLocation"`
					LogicalLocations []struct {
						FullyQualifiedName string `json:"fullyQualifiedName"`
					} `json:"logicalLocations"`
				} `json:"locations"`
				Properties struct {
					URL string `json:"url"`
				} `json:"properties"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(stdout), &log); err != nil {
		t.Fatalf("sarif: %v\n%s", err, stdout)
	}
	run := log.Runs[0]
	if log.Version != "2.1.0" || len(run.Results) != 2 || len(run.Tool.Driver.Rules) != 2 {
		t.Fatalf("want two findings of two kinds:\n%s", stdout)
	}
	for _, r := range run.Results {
		// Named on the command line: no file declares the target, so the
		// location is logical only; the endpoint is in the properties.
		loc := r.Locations[0]
		if run.Tool.Driver.Rules[r.RuleIndex].ID != r.RuleID || r.Level != "error" || !strings.HasPrefix(r.Properties.URL, "https://127.0.0.1:") ||
			loc.PhysicalLocation != nil || len(loc.LogicalLocations) != 1 || !strings.HasPrefix(loc.LogicalLocations[0].FullyQualifiedName, "https://127.0.0.1:") {
			t.Fatalf("result %+v", r)
		}
	}
	for _, want := range []string{"::error title=ConnectionUnreachable (MCPX1004)::", "::error title=TlsCertificate (MCPX1006)::"} {
		if !strings.Contains(stderr, want) {
			t.Fatalf("annotation %q missing from stderr:\n%s", want, stderr)
		}
	}
	if strings.Contains(stdout, "::error") {
		t.Fatal("annotations belong on stderr")
	}
}
