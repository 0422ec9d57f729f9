package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
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
// carry: a development build's version is not numeric (SARIF2005).
var sarifToleratedWarnings = []string{"SARIF2005"}

// validateSARIF checks file with Microsoft's SARIF multitool (the schema
// and its rules): no error, no warning beyond the tolerated ones. With
// github, also GitHub code scanning's ingestion rules (GH1001-GH2012): a
// log whose every finding is declared in a file (targets file, config).
func validateSARIF(t *testing.T, file string, github ...bool) {
	t.Helper()
	tool := filepath.Join(peersDir(t), "node_modules", ".bin", "sarif-multitool")
	out := filepath.Join(t.TempDir(), "validation.sarif")
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	args := []string{"validate", file, "-o", out}
	if len(github) > 0 && github[0] {
		rules, err := filepath.Abs(filepath.Join("testdata", "sarif-github-rules.xml"))
		if err != nil {
			t.Fatal(err)
		}
		// The tool's launcher runs it through a shell: the list is quoted.
		args = append(args, "--config", rules, "--rule-kind", "'Sarif;Ghas'")
	}
	b, err := exec.CommandContext(ctx, tool, args...).CombinedOutput()
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
	if len(log.Runs) == 0 || bytes.Contains(b, []byte("ERR999")) {
		t.Fatalf("SARIF validation of %s did not run its rules:\n%s", file, b)
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

// checkJUnit validates file against the Apache Ant JUnit schema with
// libxml2 (tools/peers/junit-validate.js); the error carries libxml2's
// messages.
func checkJUnit(t *testing.T, file string) error {
	t.Helper()
	dir := peersDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	b, err := exec.CommandContext(ctx, filepath.Join(dir, nodeRel), filepath.Join(dir, "junit-validate.js"), file).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w\n%s", err, b)
	}
	return nil
}

// readJUnit validates file against the JUnit schema, reads it with
// test-results-parser (tools/peers/junit-read.js) and checks that its
// totals agree with its cases.
func readJUnit(t *testing.T, file string) junitView {
	t.Helper()
	if err := checkJUnit(t, file); err != nil {
		t.Fatalf("%s is not valid JUnit (Ant schema): %v", file, err)
	}
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
	// Per target: six steps and the outcome, a step that did not run
	// listed as skipped in the suite's output (the schema has no skipped
	// case). Failed cases: refused (tcp, outcome), expired (tls,
	// outcome), expiring-soon's tls warning.
	var raw struct {
		Suites []struct {
			Name string `xml:"name,attr"`
			Out  string `xml:"system-out"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(r.stdout), &raw); err != nil || len(raw.Suites) != len(v.Suites) {
		t.Fatalf("decoding the report: %v\n%s", err, r.stdout)
	}
	failed := map[string][]string{}
	for i, s := range v.Suites {
		if skipped := strings.Count(raw.Suites[i].Out, ": skipped: "); len(s.Cases)+skipped != 7 {
			t.Errorf("suite %s has %d cases and %d skipped steps, want 7 in all:\n%s", s.Name, len(s.Cases), skipped, raw.Suites[i].Out)
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

	// The same endpoints listed in a targets file of a repository: code
	// scanning's rules pass, and each finding (and annotation) points at
	// the line of its target's entry.
	repo := t.TempDir()
	var targets strings.Builder
	targets.WriteString("# endpoints\ntargets:\n")
	line := map[string]int{}
	for i, u := range urls {
		line[u] = 3 + 2*i
		fmt.Fprintf(&targets, "  - url: %s\n    name: t%d\n", u, i)
	}
	file := filepath.Join(repo, ".github", "mcpx", "targets.yaml")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(targets.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	e.workDir = repo
	e.extraEnv = append(e.extraEnv, "GITHUB_ACTIONS=true")
	r = e.run("probe", "--ca-file", ca, "--timeout", "5s", "--file", ".github/mcpx/targets.yaml", "-o", "sarif")
	if r.code != 19 {
		t.Fatalf("want exit 19 (two targets fail):\n%s", r)
	}
	validateSARIF(t, writeOut(t, "probe-file.sarif", r.stdout), true)
	var log struct {
		Runs []struct {
			OriginalURIBaseIDs map[string]struct {
				URI string `json:"uri"`
			} `json:"originalUriBaseIds"`
			Results []struct {
				Locations []struct {
					PhysicalLocation struct {
						ArtifactLocation struct {
							URI       string `json:"uri"`
							URIBaseID string `json:"uriBaseId"`
						} `json:"artifactLocation"`
						Region struct {
							StartLine int `json:"startLine"`
						} `json:"region"`
					} `json:"physicalLocation"`
				} `json:"locations"`
				Properties struct {
					URL string `json:"url"`
				} `json:"properties"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &log); err != nil || len(log.Runs) != 1 || len(log.Runs[0].Results) != 3 {
		t.Fatalf("want three findings: %v\n%s", err, r.stdout)
	}
	if root := log.Runs[0].OriginalURIBaseIDs["%SRCROOT%"].URI; root != "file://"+repo+"/" {
		t.Errorf("%%SRCROOT%% is %q, want the working directory %s", root, repo)
	}
	for _, res := range log.Runs[0].Results {
		loc := res.Locations[0].PhysicalLocation
		if loc.ArtifactLocation.URI != ".github/mcpx/targets.yaml" || loc.ArtifactLocation.URIBaseID != "%SRCROOT%" || loc.Region.StartLine != line[res.Properties.URL] {
			t.Errorf("finding about %s located at %+v, want line %d of the targets file", res.Properties.URL, loc, line[res.Properties.URL])
		}
	}
	for _, i := range []int{2, 3, 4} {
		if want := fmt.Sprintf("file=.github/mcpx/targets.yaml,line=%d,col=3,title=", line[urls[i]]); !strings.Contains(r.stderr, want) {
			t.Errorf("no annotation %q on stderr (stdout is the SARIF log):\n%s", want, r.stderr)
		}
	}
	// Under a table, stdout carries the annotations, as GitHub documents.
	r = e.run("probe", "--ca-file", ca, "--timeout", "5s", "--file", ".github/mcpx/targets.yaml")
	if r.code != 19 || !strings.Contains(r.stdout, "::error file=.github/mcpx/targets.yaml,line=") || strings.Contains(r.stderr, "::error") {
		t.Fatalf("annotations under the table belong on stdout:\n%s", r)
	}
}

// Drill verdicts in the report formats: a PASS has no finding, a FAIL one
// per failed check, located at the server's entry in the config, and
// annotated in GitHub Actions.
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
	if !strings.Contains(r.stdout, `"MCPX3103"`) || !strings.Contains(r.stdout, `"url": "`+fx.MCP+`"`) ||
		!strings.Contains(r.stdout, `"uri": "file://`+o.Config+`"`) || !strings.Contains(r.stdout, `"startLine": `) {
		t.Fatalf("want the lost grant located at the server's entry in the config, with its URL:\n%s", r.stdout)
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

// The JUnit schema check rejects what the Ant schema rejects: a test that
// passes through it means the report is valid, not that nothing was read.
func TestJUnitSchemaCheckRejects(t *testing.T) {
	const suite = `<testsuite name="t" package="mcpx probe" id="0" timestamp="2026-01-02T03:04:05" hostname="localhost" tests="1" failures="0" errors="0" time="0.001">` +
		`<properties/>%s<system-out/><system-err/></testsuite>`
	const pass = `<testcase name="tcp" classname="t" time="0.001"/>`
	doc := func(body string) string {
		return `<?xml version="1.0" encoding="UTF-8"?><testsuites>` + body + `</testsuites>`
	}
	for _, tc := range []struct {
		name, xml, want string // want: a fragment of libxml2's message; "" means valid
	}{
		{"valid", doc(fmt.Sprintf(suite, pass)), ""},
		{"no hostname", doc(strings.Replace(fmt.Sprintf(suite, pass), ` hostname="localhost"`, "", 1)), "'hostname' is required"},
		{"zoned timestamp", doc(strings.Replace(fmt.Sprintf(suite, pass), `03:04:05"`, `03:04:05Z"`, 1)), "timestamp"},
		{"totals on testsuites", strings.Replace(doc(fmt.Sprintf(suite, pass)), "<testsuites>", `<testsuites tests="1">`, 1), "'tests' is not allowed"},
		{"skipped case", doc(fmt.Sprintf(suite, `<testcase name="tcp" classname="t" time="0"><skipped/></testcase>`)), "skipped"},
		{"failure without type", doc(fmt.Sprintf(suite, `<testcase name="tcp" classname="t" time="0"><failure message="x"/></testcase>`)), "'type' is required"},
		{"not XML", "<testsuites><testsuite>", "Premature end of data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkJUnit(t, writeOut(t, "report.xml", tc.xml))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid document rejected: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("invalid document accepted:\n%s", tc.xml)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("rejected, but not for %q: %v", tc.want, err)
			}
		})
	}
}
