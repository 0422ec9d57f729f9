package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if got != string(want) {
		t.Fatalf("differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

var (
	ruleDNS  = &Rule{ID: "X1", Name: "DnsFailure", Short: "The name did not resolve", Help: "check the name"}
	ruleWarn = &Rule{ID: "X2", Name: "TlsWarning", Short: "TLS warning", Help: "renew"}
)

// sampleRoot is the working directory of sample: "good" is declared in a
// targets file under it, "bad" was named on the command line.
var sampleRoot = filepath.FromSlash("/work/repo")

func sample() Run {
	return Run{Tool: "mcpx probe", Version: "1.2.3", Root: sampleRoot, Host: "ci-runner",
		Started: time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("CET", 3600)), Targets: []Target{
			{Name: "good", URL: "https://good.test/mcp", Outcome: "ok", Passed: true, DurationMS: 12,
				Source: &Source{File: filepath.Join(sampleRoot, ".github", "mcp x", "targets.yaml"), Line: 3, Column: 5, EndColumn: 40}, Checks: []Check{
					{Name: "dns", Status: Pass, DurationMS: 1, Message: "resolved"},
					{Name: "tls", Status: Warn, DurationMS: 5, Message: "expires in 3 days", Rule: ruleWarn},
					{Name: "auth", Status: Skip, Message: "not protected"},
				}},
			{Name: "bad", URL: "https://bad.test/mcp", Outcome: "dns_failure", DurationMS: 2, Checks: []Check{
				{Name: "dns", Status: Fail, DurationMS: 2, Message: "no such host <x> & \"y\"", Rule: ruleDNS},
				{Name: "tcp", Status: Skip, Message: "skipped after dns_failure"},
			}},
		}}
}

func TestSARIFGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSARIF(&b, sample()); err != nil {
		t.Fatal(err)
	}
	golden(t, "probe.sarif", b.String())
	var v map[string]any
	if err := json.Unmarshal(b.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	// Nothing found is still a log: empty rules and results, not null.
	b.Reset()
	if err := WriteSARIF(&b, Run{Tool: "mcpx probe"}); err != nil || !strings.Contains(b.String(), `"results": []`) || !strings.Contains(b.String(), `"rules": []`) {
		t.Fatalf("empty run: %v\n%s", err, b.String())
	}
}

func TestJUnitGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJUnit(&b, sample()); err != nil {
		t.Fatal(err)
	}
	golden(t, "probe.xml", b.String())
	// Readers total the suites: skipped checks are no test cases.
	totals := func() (tests, failures int) {
		var v struct {
			Suites []struct {
				Tests    int `xml:"tests,attr"`
				Failures int `xml:"failures,attr"`
			} `xml:"testsuite"`
		}
		if err := xml.Unmarshal(b.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		for _, s := range v.Suites {
			tests += s.Tests
			failures += s.Failures
		}
		return tests, failures
	}
	if tests, failures := totals(); tests != 5 || failures != 2 {
		t.Fatalf("totals: %d tests, %d failures", tests, failures)
	}
	// --fail-on warn: the warning is a failure too.
	r := sample()
	r.FailOnWarn = true
	b.Reset()
	_ = WriteJUnit(&b, r)
	if _, failures := totals(); failures != 3 {
		t.Fatalf("fail on warn: %d failures", failures)
	}
	// An unknown host is the schema's "localhost".
	r.Host = ""
	b.Reset()
	_ = WriteJUnit(&b, r)
	if !strings.Contains(b.String(), `hostname="localhost"`) {
		t.Fatalf("no host:\n%s", b.String())
	}
}

func TestGitHubAnnotations(t *testing.T) {
	r := sample()
	r.Targets[1].Checks[0].Message = "50% lost\nsecond line, with: colon"
	var b bytes.Buffer
	if err := WriteGitHubAnnotations(&b, r); err != nil {
		t.Fatal(err)
	}
	want := "::warning file=.github/mcp x/targets.yaml,line=3,col=5,title=TlsWarning (X2)::good: tls: expires in 3 days%0AFix: renew\n" +
		"::error title=DnsFailure (X1)::bad: dns: 50%25 lost%0Asecond line, with: colon%0AFix: check the name\n"
	if b.String() != want {
		t.Fatalf("got\n%q\nwant\n%q", b.String(), want)
	}
	if escapeProperty("a:b,c%") != "a%3Ab%2Cc%25" {
		t.Fatal("property escaping")
	}
	t.Setenv("GITHUB_ACTIONS", "true")
	if !InGitHubActions() {
		t.Fatal("GITHUB_ACTIONS=true")
	}
	t.Setenv("GITHUB_ACTIONS", "")
	if InGitHubActions() {
		t.Fatal("unset")
	}
}

func TestSourceLocations(t *testing.T) {
	text := []byte("targets:\n  - url: https://a.test/mcp\n  - server: dócs\r\n")
	if s := SourceOf("t.yaml", text, 3, 3); s == nil || s.Line != 3 || s.Column != 3 || s.EndColumn != 17 {
		t.Fatalf("third line: %+v", s)
	}
	for _, pos := range [][2]int{{0, 1}, {5, 1}, {2, 0}, {2, 40}} {
		if s := SourceOf("t.yaml", text, pos[0], pos[1]); s != nil {
			t.Errorf("%v is outside the text: %+v", pos, s)
		}
	}
	tests := []struct {
		file, root, uri string
		relative        bool
	}{
		{"/repo/.github/mcpx/targets.yaml", "/repo", ".github/mcpx/targets.yaml", true},
		{"/repo/a b/c:d.yaml", "/repo", "a%20b/c:d.yaml", true},
		{"/repo/c:d.yaml", "/repo", "./c:d.yaml", true},
		{"/elsewhere/config.yaml", "/repo", "file:///elsewhere/config.yaml", false},
		{"/repo-other/config.yaml", "/repo", "file:///repo-other/config.yaml", false},
	}
	for _, tt := range tests {
		s := &Source{File: filepath.FromSlash(tt.file), Line: 1, Column: 1, EndColumn: 2}
		uri, rel := s.uri(filepath.FromSlash(tt.root))
		if uri != tt.uri || rel != tt.relative {
			t.Errorf("%s under %s: %q %v, want %q %v", tt.file, tt.root, uri, rel, tt.uri, tt.relative)
		}
	}
}
