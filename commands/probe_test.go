package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/tlsfixtures"
	"github.com/mcpx-dev/mcpx/probe"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files")

// runMCPX runs the app in-process with a socket where no proxyd listens
// (unless socket is given) and returns stdout, stderr and the exit code.
func runMCPX(t *testing.T, socket string, args ...string) (string, string, int) {
	t.Helper()
	if socket == "" {
		socket = filepath.Join(t.TempDir(), "none.sock")
	}
	var stdout, stderr bytes.Buffer
	app := New(&stdout, &stderr)
	full := append([]string{"mcpx", "--socket", socket, "--config", filepath.Join(t.TempDir(), "absent.yaml")}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := app.RunContext(ctx, normalizeArgs(app, full))
	if err != nil && !IsSilent(err) {
		stderr.WriteString("mcpx: " + err.Error() + "\n")
	}
	return stdout.String(), stderr.String(), ExitCode(err)
}

func startFixture(t *testing.T, kind string) *tlsfixtures.Fixture {
	t.Helper()
	f, err := tlsfixtures.Start(kind)
	if err != nil {
		t.Fatalf("start fixture %s: %v", kind, err)
	}
	t.Cleanup(f.Close)
	return f
}

func TestProbeExitCodes(t *testing.T) {
	tests := []struct {
		kind  string
		extra []string
		code  int
	}{
		{tlsfixtures.KindOK, nil, 0},
		{tlsfixtures.KindAuthOK, nil, 0},
		{tlsfixtures.KindAuthOK, []string{"--require-auth-ok"}, 10},
		{tlsfixtures.KindAuthPRMMissing, nil, 11},
		{tlsfixtures.KindDNSFailure, nil, 12},
		{tlsfixtures.KindRefused, nil, 13},
		{tlsfixtures.KindHangingHandshake, []string{"--timeout", "300ms"}, 14},
		{tlsfixtures.KindExpired, nil, 15},
		{tlsfixtures.KindPlainHTTP, nil, 16},
		{tlsfixtures.KindHTTP502HTML, nil, 17},
		{tlsfixtures.KindHTTP200NotMCP, nil, 18},
	}
	for _, tt := range tests {
		// Not parallel: the *cli.Command values are package globals that
		// urfave/cli mutates on every run.
		t.Run(tt.kind+strings.Join(tt.extra, ""), func(t *testing.T) {
			f := startFixture(t, tt.kind)
			for _, format := range []string{"table", "json"} {
				args := append([]string{"probe", f.URL, "--ca-file", f.CAFile, "-o", format}, tt.extra...)
				_, stderr, code := runMCPX(t, "", args...)
				if code != tt.code {
					t.Fatalf("-o %s: exit %d, want %d (stderr %s)", format, code, tt.code, stderr)
				}
				if !strings.Contains(stderr, "ran in-process (proxyd is not running)") {
					t.Fatalf("stderr does not say where the probe ran: %q", stderr)
				}
			}
		})
	}
}

// TestProbeExpectSaysWhyInJSON: one target that fails its --expect
// keeps the report on stdout as it is and says why on stderr.
func TestProbeExpectSaysWhyInJSON(t *testing.T) {
	f := startFixture(t, tlsfixtures.KindOK)
	stdout, stderr, code := runMCPX(t, "", "probe", f.URL, "--ca-file", f.CAFile, "--expect", "auth_required", "-o", "json")
	if code != ExitProbeTargets || !strings.Contains(stderr, "probe failed: ") || !strings.Contains(stderr, "auth_required") {
		t.Errorf("exit %d, stderr %s", code, stderr)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep["result"] == nil {
		t.Errorf("stdout is not the report (%v): %s", err, stdout)
	}
}

func TestProbeJSONIsTheReport(t *testing.T) {
	f := startFixture(t, tlsfixtures.KindExpired)
	stdout, _, _ := runMCPX(t, "", "probe", f.URL, "--ca-file", f.CAFile, "-o", "json")
	var rep probe.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not a JSON report: %v\n%s", err, stdout)
	}
	if rep.Result.Code != probe.CodeTLSCertificate || rep.Result.Reason != probe.ReasonExpired || rep.Mode != probe.ModeInProcess {
		t.Fatalf("report %+v", rep.Result)
	}
}

// Canary secrets through every output format.
func TestProbeRedactsEverywhere(t *testing.T) {
	const (
		hdr   = "canary-cli-header-91ab"
		user  = "canary-cli-user-11"
		pass  = "canary-cli-pass-22"
		query = "canary-cli-query-33"
	)
	for _, kind := range []string{tlsfixtures.KindOK, tlsfixtures.KindAuthOK, tlsfixtures.KindHTTP404, tlsfixtures.KindSelfSigned} {
		f := startFixture(t, kind)
		target := strings.Replace(f.URL, "://", "://"+user+":"+pass+"@", 1) + "?api_key=" + query
		for _, format := range []string{"table", "json", "yaml"} {
			stdout, stderr, _ := runMCPX(t, "", "probe", target, "--ca-file", f.CAFile,
				"--header", "Authorization: Bearer "+hdr, "-H", "X-Other:"+hdr+"-2", "-o", format)
			for _, c := range []string{hdr, user, pass, query} {
				if strings.Contains(stdout+stderr, c) {
					t.Fatalf("%s -o %s: %q leaked:\n%s\n%s", kind, format, c, stdout, stderr)
				}
			}
		}
	}
}

func TestProbeUsageErrors(t *testing.T) {
	tests := [][]string{
		{"probe"},
		{"probe", "https://x.test/mcp", "--parallel", "0"},
		{"probe", "https://x.test/mcp", "--fail-on", "info"},
		{"probe", "https://x.test/mcp", "--expect", "fine"},
		{"probe", "https://x.test/mcp", "--header", "no-colon-here"},
		{"probe", "https://x.test/mcp", "--protocol", "v9"},
		{"probe", "https://x.test/mcp", "--transport", "stdio"},
		{"probe", "https://x.test/mcp", "--timeout", "0s"},
		{"probe", "https://x.test/mcp", "-o", "xml"},
	}
	for _, args := range tests {
		_, stderr, code := runMCPX(t, "", args...)
		if code != ExitUsage && code != ExitConfig {
			t.Errorf("%v: exit %d, want usage (stderr %s)", args, code, stderr)
		}
	}
	if _, stderr, code := runMCPX(t, "", "probe", "not-a-configured-server"); code != ExitNotFound {
		t.Errorf("probe of an unknown server: exit %d, want %d (stderr %s)", code, ExitNotFound, stderr)
	}
	if _, stderr, code := runMCPX(t, "", "probe", "not-a-configured-server", "another-unknown-server"); code != ExitNotFound {
		t.Errorf("probe of several targets, one an unknown server: exit %d, want %d (stderr %s)", code, ExitNotFound, stderr)
	}
	// A mistyped URL is not echoed: it may carry credentials.
	_, stderr, _ := runMCPX(t, "", "probe", "https//user:canary-typo-pass@x.test/mcp")
	if strings.Contains(stderr, "canary-typo-pass") {
		t.Fatalf("mistyped target echoed: %s", stderr)
	}
	// A host without a scheme is told the form, not echoed either.
	_, stderr, code := runMCPX(t, "", "probe", "user:canary-host-pass@127.0.0.1:1/mcp")
	if code != ExitUsage || strings.Contains(stderr, "canary-host-pass") || !strings.Contains(stderr, "TARGET has no scheme: write it as https://") {
		t.Errorf("a target without a scheme: exit %d, stderr %s", code, stderr)
	}
	// The header value is a credential: never echoed, even when malformed,
	// by probe and servers add alike.
	for _, args := range [][]string{
		{"probe", "https://x.test/mcp", "--header", "secret-value-without-colon"},
		{"probe", "https://x.test/mcp", "--header", "secret value: with a space in the name"},
		{"servers", "add", "docs", "https://x.test/mcp", "--header", "secret-value-without-colon"},
		{"servers", "add", "docs", "https://x.test/mcp", "-H", "ok:1", "-H", "secret value: with a space in the name"},
	} {
		_, stderr, code := runMCPX(t, "", args...)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want usage (stderr %s)", args, code, stderr)
		}
		if strings.Contains(stderr, "secret") {
			t.Errorf("%v: malformed header echoed: %s", args, stderr)
		}
	}
}

func TestProbeConfiguredServer(t *testing.T) {
	f := startFixture(t, tlsfixtures.KindAuthOK)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := "servers:\n  - name: docs\n    url: " + f.URL + "\n    headers:\n      X-Team: canary-config-header-77\n    tls:\n      ca_file: " + f.CAFile + "\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	app := New(&stdout, &stderr)
	err := app.RunContext(context.Background(), normalizeArgs(app, []string{"mcpx", "--socket", filepath.Join(dir, "none.sock"), "--config", cfgPath, "probe", "docs"}))
	if code := ExitCode(err); code != 0 {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "mcpx login docs") {
		t.Fatalf("hint does not name the configured server:\n%s", stdout.String())
	}
	if strings.Contains(stdout.String()+stderr.String(), "canary-config-header-77") {
		t.Fatal("configured header value leaked")
	}
}

var (
	portRE  = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	dateRE  = regexp.MustCompile(`\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}Z)?`)
	daysRE  = regexp.MustCompile(`\(\d+ days\)`)
	cipher  = regexp.MustCompile(`TLS_[A-Z0-9_]+`)
	tempDir = regexp.MustCompile(`/tmp/[^ "]+`)
)

// normalise makes a report stable: ports, dates, durations and ciphers.
func normalise(t *testing.T, rep *probe.Report) *probe.Report {
	t.Helper()
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	s := portRE.ReplaceAllString(string(b), "127.0.0.1:PORT")
	s = dateRE.ReplaceAllString(s, "DATE")
	s = daysRE.ReplaceAllString(s, "(N days)")
	s = cipher.ReplaceAllString(s, "CIPHER")
	s = tempDir.ReplaceAllString(s, "TMP")
	var out probe.Report
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Fatal(err)
	}
	// Timings: each step 1.5 ms after the one before, each discovery
	// fetch 1 ms long, one after another inside the auth step.
	at := 0.0
	for i := range out.Steps {
		s := &out.Steps[i]
		if s.Status == probe.StatusSkip {
			continue
		}
		s.StartMS, s.DurationMS = at, 1.5
		at += 1.5
		if data, ok := s.Data.(map[string]any); ok {
			atts, _ := data["attempts"].([]any)
			for j, a := range atts {
				if m, ok := a.(map[string]any); ok && m["duration_ms"] != nil {
					m["start_ms"], m["duration_ms"] = s.StartMS+0.2+float64(j)*0.4, 0.3
				}
			}
		}
	}
	return &out
}

func TestProbeTableGolden(t *testing.T) {
	for _, kind := range []string{tlsfixtures.KindOK, tlsfixtures.KindExpired, tlsfixtures.KindAuthOK, tlsfixtures.KindRefused, tlsfixtures.KindHTTP502HTML} {
		t.Run(kind, func(t *testing.T) {
			f := startFixture(t, kind)
			rep := probe.Run(context.Background(), probe.Options{Target: f.URL, CAFile: f.CAFile, Timeout: 2 * time.Second})
			var buf bytes.Buffer
			if err := probeTable(&buf, normalise(t, rep), false, true); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "probe", kind+".golden")
			if *updateGolden {
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (run with -update to create): %v", err)
			}
			if buf.String() != string(want) {
				t.Fatalf("table differs from %s:\n--- got\n%s\n--- want\n%s", path, buf.String(), want)
			}
		})
	}
}
