package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// monotonic reads the system's monotonic clock (CLOCK_MONOTONIC) in
// nanoseconds: Go's own monotonic readings have no fixed origin, and
// this clock is the one a scheduler trace can be recorded on ('perf
// sched record -k CLOCK_MONOTONIC'), so a dumped call can be found in it.
func monotonic() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0
	}
	return ts.Nano()
}

// dumpRounds writes a paired measurement's calls to a CSV file in the
// directory MCPX_BENCH_DUMP names (nothing when it is unset): a header of
// two columns per path, its name and "<name> start_ns", then one line
// per round with each path's latency in microseconds (empty for a failed
// call) and the call's start on the monotonic clock (see monotonic). The
// rounds keep their pairing and order, so a run's tail can be looked at
// afterwards beyond the p50 and p99 the report prints: its whole
// distribution, or its calls against a timeline of the processes'.
func dumpRounds(b testing.TB, label string, clients int, clock string, paths []path, rounds paired) {
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
		w.WriteString(p.name + "," + p.name + " start_ns")
	}
	w.WriteByte('\n')
	for n := range rounds[0] {
		for i := range paths {
			if i > 0 {
				w.WriteByte(',')
			}
			s := rounds[i][n]
			if s.ok {
				fmt.Fprint(w, s.took.Microseconds())
			}
			fmt.Fprintf(w, ",%d", s.start)
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

func TestDumpRounds(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MCPX_BENCH_DUMP", dir)
	paths := []path{{name: "direct/M"}, {name: "proxyd"}}
	rounds := paired{
		{{took: 412 * time.Microsecond, ok: true, start: 1000}, {start: 5000}},
		{{took: 655 * time.Microsecond, ok: true, start: 2000}, {took: 700 * time.Microsecond, ok: true, start: 3000}},
	}
	dumpRounds(t, "modern/modern+p", 1, "wire", paths, rounds)
	got, err := os.ReadFile(filepath.Join(dir, "modern-modern-p-c1-wire.csv"))
	if err != nil {
		t.Fatal(err)
	}
	want := "direct/M,direct/M start_ns,proxyd,proxyd start_ns\n" +
		"412,1000,655,2000\n" +
		",5000,700,3000\n" // a failed call: no latency, its start kept
	if string(got) != want {
		t.Errorf("dump:\n%s\nwant:\n%s", got, want)
	}
	if a, b := monotonic(), monotonic(); a <= 0 || b < a {
		t.Errorf("monotonic: %d then %d", a, b)
	}
}
