package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/tlsfixtures"
	"github.com/mcpx-dev/mcpx/probe"
)

// TestProbeEveryFixtureThroughBinary runs `mcpx probe -o json` against
// every loopback failure server four ways: by URL with --ca-file and by
// configured name (whose tls.ca_file applies), each in-process and through
// proxyd. All four must give the fixture's verdict and exit code, and a
// canary header value never appears in any output.
func TestProbeEveryFixtureThroughBinary(t *testing.T) {
	const canary = "canary-header-value-7f3a"
	e := newEnv(t)
	fixtures := map[string]*tlsfixtures.Fixture{}
	var cfg strings.Builder
	cfg.WriteString("listen: 127.0.0.1:0\nservers:\n")
	for _, kind := range tlsfixtures.Kinds {
		f, err := tlsfixtures.Start(kind)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		t.Cleanup(f.Close)
		fixtures[kind] = f
		// Disabled: proxyd does not connect to them, the probe still resolves them.
		fmt.Fprintf(&cfg, "  - name: %s\n    url: %s\n    disabled: true\n    headers: {X-Api-Key: %s}\n", kind, f.URL, canary)
		if f.CAFile != "" {
			fmt.Fprintf(&cfg, "    tls: {ca_file: %s}\n", f.CAFile)
		}
	}
	e.writeConfig(cfg.String())

	type outcome struct {
		code, reason string
		status, exit int
	}
	probeOnce := func(kind, how string, args ...string) (outcome, bool) {
		// A short step timeout only where a timeout is the verdict: on a
		// loaded machine a healthy step may take longer than that.
		timeout := "15s"
		if tlsfixtures.Expected[kind].Code == probe.CodeTimeout {
			timeout = "2s"
		}
		r := e.run(append([]string{"probe", "--timeout", timeout, "-o", "json"}, args...)...)
		var rep probe.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Errorf("%s %s: decoding the report: %v\n%s", kind, how, err, r)
			return outcome{}, false
		}
		if rep.Result.Hint == "" {
			t.Errorf("%s %s: no hint", kind, how)
		}
		if len(rep.Steps) != 6 {
			t.Errorf("%s %s: %d steps, want dns tcp tls http mcp auth", kind, how, len(rep.Steps))
		}
		if strings.Contains(r.stdout+r.stderr, canary) {
			t.Errorf("%s %s: the header value leaked into the output", kind, how)
		}
		wantMode, wantNote := probe.ModeInProcess, "ran in-process (proxyd is not running)"
		if strings.HasSuffix(how, "through proxyd") {
			wantMode, wantNote = probe.ModeProxyd, "ran through proxyd"
		}
		if rep.Mode != wantMode || !strings.Contains(r.stderr, wantNote) {
			t.Errorf("%s %s: mode %q, stderr %q", kind, how, rep.Mode, r.stderr)
		}
		return outcome{rep.Result.Code, rep.Result.Reason, rep.Result.HTTPStatus, r.code}, true
	}
	byURL := func(kind string) []string {
		args := []string{fixtures[kind].URL, "--header", "X-Api-Key: " + canary}
		if ca := fixtures[kind].CAFile; ca != "" {
			args = append(args, "--ca-file", ca)
		}
		return args
	}
	got := map[string]map[string]outcome{}
	record := func(kind, how string, args ...string) {
		if o, ok := probeOnce(kind, how, args...); ok {
			if got[kind] == nil {
				got[kind] = map[string]outcome{}
			}
			got[kind][how] = o
		}
	}
	for _, kind := range tlsfixtures.Kinds {
		record(kind, "by URL in-process", byURL(kind)...)
		record(kind, "by name in-process", kind)
	}
	e.startProxyd()
	for _, kind := range tlsfixtures.Kinds {
		record(kind, "by URL through proxyd", byURL(kind)...)
		record(kind, "by name through proxyd", kind)
	}
	// Through proxyd a name is resolved from proxyd's configuration, not
	// from the CLI's --config; a name proxyd does not know is a usage error.
	other := filepath.Join(t.TempDir(), "other.yaml")
	if err := os.WriteFile(other, []byte("servers: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.runRaw("--socket", e.Socket, "--config", other, "--state-dir", e.StateDir, "probe", tlsfixtures.KindAuthOK, "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"auth_required"`) {
		t.Errorf("probe by a name only proxyd's config has:\n%s", r)
	}
	if r := e.run("probe", "no-such-server"); r.code != 8 || !strings.Contains(r.stderr, `no server named "no-such-server"`) {
		t.Errorf("probe of an unknown name through proxyd:\n%s", r)
	}

	for _, kind := range tlsfixtures.Kinds {
		x := tlsfixtures.Expected[kind]
		want := outcome{x.Code, x.Reason, x.HTTPStatus, probe.ExitCode(x.Code)}
		for how, o := range got[kind] {
			if o != want {
				t.Errorf("%s %s: %s/%s/%d exit %d, want %s/%s/%d exit %d", kind, how,
					o.code, o.reason, o.status, o.exit, want.code, want.reason, want.status, want.exit)
			}
		}
	}
}
