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

func sample() Run {
	return Run{Tool: "mcpx probe", Version: "1.2.3", Targets: []Target{
		{Name: "good", URL: "https://good.test/mcp", Outcome: "ok", Passed: true, DurationMS: 12, Checks: []Check{
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
	var v struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Skipped  int `xml:"skipped,attr"`
	}
	if err := xml.Unmarshal(b.Bytes(), &v); err != nil || v.Tests != 7 || v.Failures != 2 || v.Skipped != 2 {
		t.Fatalf("totals %+v, %v", v, err)
	}
	// --fail-on warn: the warning is a failure too.
	r := sample()
	r.FailOnWarn = true
	b.Reset()
	_ = WriteJUnit(&b, r)
	if err := xml.Unmarshal(b.Bytes(), &v); err != nil || v.Failures != 3 {
		t.Fatalf("fail on warn: %+v, %v", v, err)
	}
}

func TestGitHubAnnotations(t *testing.T) {
	r := sample()
	r.Targets[1].Checks[0].Message = "50% lost\nsecond line, with: colon"
	var b bytes.Buffer
	if err := WriteGitHubAnnotations(&b, r); err != nil {
		t.Fatal(err)
	}
	want := "::warning title=TlsWarning (X2)::good: tls: expires in 3 days%0AFix: renew\n" +
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
