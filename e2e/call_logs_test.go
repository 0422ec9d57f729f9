package e2e

import (
	"strings"
	"testing"
)

// mcpx call shows the upstream's log messages of --log-level (info by
// default) and above, in either era: the upstream is asked for them (a
// modern upstream logs nothing for a request that names no level, a
// legacy one after logging/setLevel), and none with off.
func TestCallShowsLogMessages(t *testing.T) {
	e, _ := conformanceBehindProxyd(t)
	for _, server := range []string{"legacy", "modern"} {
		for _, tt := range []struct {
			flags []string
			logs  int
		}{
			{nil, 3},
			{[]string{"--log-level", "debug"}, 3},
			{[]string{"--log-level", "error"}, 0},
			{[]string{"--log-level", "off"}, 0},
		} {
			r := e.mustRun(append([]string{"call", server, "test_tool_with_logging"}, tt.flags...)...)
			if got := strings.Count(r.stderr, "[info] upstream conformance:"); got != tt.logs {
				t.Errorf("%s %v: %d log lines on stderr, want %d\n%s", server, tt.flags, got, tt.logs, r)
			}
		}
	}
	if r := e.run("call", "legacy", "test_tool_with_logging", "--log-level", "loud"); r.code != 2 || !strings.Contains(r.stderr, "--log-level takes debug, info,") {
		t.Errorf("an unknown level: want exit 2 naming the levels\n%s", r)
	}
}

// mcpx call says why a sampling request goes unanswered (it has no
// model) whichever era the upstream asks in: a legacy upstream's request,
// a modern upstream's input request of an input_required result.
func TestCallSaysSamplingIsRefused(t *testing.T) {
	e, _ := conformanceBehindProxyd(t)
	for _, server := range []string{"legacy", "modern"} {
		r := e.run("call", server, "test_sampling", "prompt=hi")
		if r.code != 4 || !strings.Contains(r.stderr, "the server asked for an LLM completion (sampling/createMessage); refused: mcpx call has no model") {
			t.Errorf("%s: sampling from mcpx call:\n%s", server, r)
		}
	}
}
