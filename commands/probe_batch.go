package commands

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/sync/errgroup"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/probe"
)

// maxParallel bounds --parallel.
const maxParallel = 32

// runProbeBatch probes every target, at most --parallel at a time, and
// judges each against its expectation.
func runProbeBatch(c *cli.Context, targets []probeTarget) (*probe.Batch, error) {
	par := c.Int("parallel")
	if par < 1 || par > maxParallel {
		return nil, usageErr("--parallel must be between 1 and %d", maxParallel)
	}
	failOn := c.String("fail-on")
	if failOn != "warn" && failOn != "fail" {
		return nil, usageErr("--fail-on must be warn or fail, not %q", failOn)
	}
	b := &probe.Batch{Targets: make([]probe.BatchTarget, len(targets)), Summary: probe.BatchSummary{FailOn: failOn}}
	notes := make([]string, len(targets))
	var g errgroup.Group
	g.SetLimit(par)
	for i, t := range targets {
		g.Go(func() error {
			rep, note, err := runProbeSomewhere(c, t.Req)
			if err != nil {
				// Not a probe's finding: a target nobody can resolve.
				return err
			}
			notes[i] = note
			bt := probe.BatchTarget{Name: t.Name, Expect: t.Expect, Report: rep}
			bt.Passed, bt.Why = judge(rep, t.Expect, failOn, c.Bool("require-auth-ok"))
			b.Targets[i] = bt
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	slices.Sort(notes)
	for _, n := range slices.Compact(notes) {
		errorf(c, "%s\n", n)
	}
	for _, t := range b.Targets {
		b.Summary.Targets++
		if t.Passed {
			b.Summary.Passed++
		} else {
			b.Summary.Failed++
		}
		for _, s := range t.Report.Steps {
			if s.Status == probe.StatusWarn {
				b.Summary.Warnings++
			}
		}
	}
	return b, nil
}

// judge decides whether a report meets the expectation: the expected code
// when one is given, else ok or auth_required (not under
// --require-auth-ok); with --fail-on warn a warning fails a target whose
// result is otherwise good.
func judge(rep *probe.Report, expect, failOn string, requireAuthOK bool) (bool, string) {
	code := rep.Result.Code
	good := code == probe.CodeOK || code == probe.CodeAuthRequired
	switch {
	case expect != "" && code != expect:
		return false, fmt.Sprintf("expected %s, got %s", expect, code)
	case expect == "" && !good:
		return false, code + ": " + rep.Result.Message
	case expect == "" && code == probe.CodeAuthRequired && requireAuthOK:
		return false, "auth_required under --require-auth-ok: sign in first"
	}
	if failOn == "warn" && good {
		var warned []string
		for _, s := range rep.Steps {
			if s.Status == probe.StatusWarn {
				warned = append(warned, s.ID)
			}
		}
		if len(warned) > 0 {
			return false, warnedWhy + strings.Join(warned, ", ") + " (--fail-on warn)"
		}
	}
	return true, ""
}

// warnedWhy starts the reason of a target failed only by its warnings.
const warnedWhy = "warnings in "

// batchExitCode: 0 when every target passed. A single target named on the
// command line that failed plainly keeps its result's own code (10-18);
// anything else that failed is ExitProbeTargets.
func batchExitCode(b *probe.Batch, single bool) int {
	if b.Summary.Failed == 0 {
		return ExitOK
	}
	if single {
		t := b.Targets[0]
		code := t.Report.Result.Code
		switch {
		case t.Expect != "":
		case code == probe.CodeAuthRequired:
			return probe.ExitAuthRequired
		case code != probe.CodeOK && probe.ExitCode(code) != ExitOK:
			return probe.ExitCode(code)
		}
	}
	return ExitProbeTargets
}

// batchTable prints one line per target, the reasons of the failed ones
// and a summary line.
func batchTable(w io.Writer, b *probe.Batch, colour bool) error {
	t := newTable(w, "TARGET", "RESULT", "EXPECT", "TIME", "FINDINGS", "VERDICT")
	var colors []string
	for _, bt := range b.Targets {
		var findings []string
		for _, s := range bt.Report.Steps {
			if s.Status == probe.StatusWarn || s.Status == probe.StatusFail {
				findings = append(findings, s.ID+" "+string(s.Status))
			}
		}
		verdict, col := "PASS", green
		if !bt.Passed {
			verdict, col = "FAIL", red
		}
		colors = append(colors, col)
		_ = t.Append([]string{redact.Control(bt.Name), bt.Report.Result.Code, dash(bt.Expect),
			fmt.Sprintf("%.1fms", reportSpan(bt.Report)), dash(strings.Join(findings, ", ")), verdict})
	}
	if colour {
		t.ColorRows(colors)
	}
	if err := t.Render(); err != nil {
		return err
	}
	for _, bt := range b.Targets {
		if bt.Passed {
			continue
		}
		fmt.Fprintf(w, "\n%s: %s\n  hint: %s\n", redact.Control(bt.Name), redact.Control(bt.Why), redact.Control(bt.Report.Result.Hint))
	}
	s := b.Summary
	fmt.Fprintf(w, "\n%d targets: %d passed, %d failed, %d warnings (--fail-on %s)\n", s.Targets, s.Passed, s.Failed, s.Warnings, s.FailOn)
	return nil
}

// reportSpan is the probe's length on its time axis.
func reportSpan(r *probe.Report) float64 {
	end := 0.0
	for _, s := range r.Steps {
		end = max(end, s.StartMS+s.DurationMS)
	}
	return end
}
