package probe_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/tlsfixtures"
)

// TestDump prints every fixture's verdict for reading (MCPX_PROBE_DUMP=1).
func TestDump(t *testing.T) {
	if os.Getenv("MCPX_PROBE_DUMP") == "" {
		t.Skip()
	}
	for _, kind := range tlsfixtures.Kinds {
		rep := probeFixture(t, kind, nil)
		fmt.Printf("=== %s\n", kind)
		for _, s := range rep.Steps {
			fmt.Printf("  %-5s %-5s %7.1fms  %s\n", s.ID, s.Status, s.DurationMS, s.Detail)
		}
		fmt.Printf("  result: %s/%s/%d: %s\n  hint: %s\n", rep.Result.Code, rep.Result.Reason, rep.Result.HTTPStatus, rep.Result.Message, rep.Result.Hint)
	}
}
