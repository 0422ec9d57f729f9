package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dumpRounds writes a paired measurement's calls to a CSV file in the
// directory MCPX_BENCH_DUMP names (nothing when it is unset): a header of
// the path names, then one line per round with each path's latency in
// microseconds (empty for a failed call). The rounds keep their pairing
// and order, so a run's tail can be looked at afterwards beyond the p50
// and p99 the report prints: its whole distribution, or its calls
// against a timeline of the processes'.
func dumpRounds(b *testing.B, label string, clients int, clock string, paths []path, rounds paired) {
	dir := os.Getenv("MCPX_BENCH_DUMP")
	if dir == "" {
		return
	}
	name := fmt.Sprintf("%s-c%d-%s.csv", strings.NewReplacer("/", "-", "+", "-").Replace(label), clients, clock)
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		b.Fatalf("MCPX_BENCH_DUMP: %v", err)
	}
	w := bufio.NewWriter(f)
	for i, p := range paths {
		if i > 0 {
			w.WriteByte(',')
		}
		w.WriteString(p.name)
	}
	w.WriteByte('\n')
	for n := range rounds[0] {
		for i := range paths {
			if i > 0 {
				w.WriteByte(',')
			}
			if s := rounds[i][n]; s.ok {
				fmt.Fprint(w, s.took.Microseconds())
			}
		}
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		b.Fatalf("MCPX_BENCH_DUMP: %v", err)
	}
	if err := f.Close(); err != nil {
		b.Fatalf("MCPX_BENCH_DUMP: %v", err)
	}
}
