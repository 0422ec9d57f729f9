package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/tlsfixtures"
	"github.com/mcpx-dev/mcpx/probe"
)

// TestProbeEveryFixtureThroughBinary runs `mcpx probe URL -o json` against
// every loopback failure server and checks the verdict, the exit code and
// that a canary header value never appears in any output.
func TestProbeEveryFixtureThroughBinary(t *testing.T) {
	const canary = "canary-header-value-7f3a"
	e := newEnv(t)
	for _, kind := range tlsfixtures.Kinds {
		want := tlsfixtures.Expected[kind]
		f, err := tlsfixtures.Start(kind)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		args := []string{"probe", f.URL, "--timeout", "2s", "--header", "X-Api-Key: " + canary, "-o", "json"}
		if f.CAFile != "" {
			args = append(args, "--ca-file", f.CAFile)
		}
		r := e.run(args...)
		f.Close()
		var rep probe.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Errorf("%s: decoding the report: %v\n%s", kind, err, r)
			continue
		}
		if rep.Result.Code != want.Code || rep.Result.Reason != want.Reason || rep.Result.HTTPStatus != want.HTTPStatus {
			t.Errorf("%s: result %s/%s/%d, want %s/%s/%d\n%s", kind, rep.Result.Code, rep.Result.Reason, rep.Result.HTTPStatus,
				want.Code, want.Reason, want.HTTPStatus, r.stdout)
		}
		if rep.Result.Hint == "" {
			t.Errorf("%s: no hint", kind)
		}
		if got, wantCode := r.code, probe.ExitCode(want.Code); got != wantCode {
			t.Errorf("%s: exit %d, want %d", kind, got, wantCode)
		}
		if strings.Contains(r.stdout+r.stderr, canary) {
			t.Errorf("%s: the header value leaked into the output", kind)
		}
		if len(rep.Steps) != 6 {
			t.Errorf("%s: %d steps, want dns tcp tls http mcp auth", kind, len(rep.Steps))
		}
	}
}
