// Package report writes what an mcpx check found in the formats CI systems
// read: SARIF 2.1.0 for code-scanning dashboards, JUnit XML for test
// reports, and GitHub Actions workflow commands for annotations. The
// commands describe their outcome once as a Run; each format is a view of
// it.
package report

import (
	"slices"
	"time"
)

// Status is the outcome of one check.
type Status string

// Check outcomes.
const (
	Pass Status = "pass"
	Warn Status = "warn"
	Fail Status = "fail"
	Skip Status = "skip"
)

// Run is everything one command checked.
type Run struct {
	Tool    string // the command, e.g. "mcpx probe"
	Version string
	Targets []Target
	// FailOnWarn makes warnings failures in the test report formats
	// (JUnit), as --fail-on warn does to the exit code.
	FailOnWarn bool
	// Root is the directory sources are relative to: the working
	// directory, the repository's checkout in CI.
	Root string
	// Started is when the command began and Host the machine it ran on:
	// the JUnit schema requires both on every test suite.
	Started time.Time
	Host    string
}

// Target is one thing checked: an endpoint of the probe, a server of a
// drill.
type Target struct {
	Name    string // what the user called it: a server name or the URL
	URL     string // redacted; the location of its findings
	Outcome string // the verdict in the command's own words
	// Passed: the outcome is what was expected. Warnings are judged by
	// their own checks (FailOnWarn), not here.
	Passed     bool
	DurationMS float64
	Checks     []Check
	// Source is where the target is declared; nil for a target named on
	// the command line.
	Source *Source
}

// Check is one step of a target.
type Check struct {
	Name       string
	Status     Status
	DurationMS float64
	Message    string
	// Rule is the kind of finding a warn or fail check is; nil for
	// pass and skip.
	Rule *Rule
}

// Rule is a kind of finding. ID is stable and opaque (SARIF
// reportingDescriptor.id); Name is its readable PascalCase name.
type Rule struct {
	ID    string
	Name  string
	Short string // one sentence: what was found
	Help  string // what to do about it
}

// Findings are the checks that found something (warn or fail), with
// their target, in order.
func (r Run) Findings() []Finding {
	var out []Finding
	for _, t := range r.Targets {
		for _, c := range t.Checks {
			if c.Rule != nil && (c.Status == Warn || c.Status == Fail) {
				out = append(out, Finding{Target: t, Check: c})
			}
		}
	}
	return out
}

// Finding is a check that found something.
type Finding struct {
	Target Target
	Check  Check
}

// Rules are the distinct rules of the findings, in first-seen order.
func (r Run) Rules() []Rule {
	var out []Rule
	for _, f := range r.Findings() {
		if !slices.ContainsFunc(out, func(x Rule) bool { return x.ID == f.Check.Rule.ID }) {
			out = append(out, *f.Check.Rule)
		}
	}
	return out
}
