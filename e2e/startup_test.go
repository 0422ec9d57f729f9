package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The collector is off while packages initialise (internal/startup) so
// that short commands do not pay for a collection before main. Its init
// must come before the heavy ones: any package init allocating a megabyte
// or more (today the JSON Schema library mcp-go's server pulls in).
func TestCollectorOffBeforeHeavyInits(t *testing.T) {
	cmd := exec.Command(mcpxBin, "--version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mcpx --version: %v\n%s", err, out)
	}
	const heavy = 1 << 20
	seen, heavies := false, 0
	for _, line := range strings.Split(string(out), "\n") {
		// init PKG @T ms, C ms clock, B bytes, N allocs
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != "init" {
			continue
		}
		if strings.HasSuffix(f[1], "/internal/startup") {
			seen = true
			continue
		}
		if n, _ := strconv.Atoi(f[7]); n >= heavy {
			heavies++
			if !seen {
				t.Errorf("%s allocates %d bytes at init before internal/startup turned the collector off", f[1], n)
			}
		}
	}
	if !seen {
		t.Fatalf("no init of internal/startup in the trace:\n%s", out)
	}
	t.Logf("%d heavy package inits, all after internal/startup", heavies)
}

// proxyd runs its collector at GOGC=1000 with a memory limit 48 MiB above
// its live heap unless the environment says otherwise (read back from its
// Go metrics).
func TestDaemonCollectorSettings(t *testing.T) {
	metric := func(m, name string) float64 {
		for _, l := range strings.Split(m, "\n") {
			if v, ok := strings.CutPrefix(l, name+" "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return f
			}
		}
		return -1
	}
	tests := []struct {
		name             string
		env              []string
		percent          float64
		limitMin, limMax float64 // bytes
	}{
		// The live heap of an idle proxyd is a few MB.
		{"defaults", nil, 1000, 48 << 20, 80 << 20},
		{"from the environment", []string{"GOGC=150", "GOMEMLIMIT=2GiB"}, 150, 2 << 30, 2 << 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.extraEnv = tt.env
			e.startProxyd()
			e.waitFor("the collector settings", func() (bool, string) {
				m := e.metrics()
				p, l := metric(m, "go_gc_gogc_percent"), metric(m, "go_gc_gomemlimit_bytes")
				return p == tt.percent && l >= tt.limitMin && l <= tt.limMax, fmt.Sprintf("GOGC %v, memory limit %v", p, l)
			})
		})
	}
}
