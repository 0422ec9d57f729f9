package commands

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/internal/report"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// Drill rules: what a failing drill found. The ids are stable: never
// renumber.
var (
	ruleSessionReinits   = report.Rule{ID: "MCPX3001", Name: "SessionReinitCount", Short: "A lost session was not re-initialised exactly once", Help: "the server must answer a forgotten session with HTTP 404 so that one re-initialisation serves every caller"}
	ruleSessionReads     = report.Rule{ID: "MCPX3002", Name: "SessionReadsFailed", Short: "Read calls failed after the session was lost", Help: "see the drill's failures; reads are retried once on the new session and should succeed"}
	ruleSessionAfter     = report.Rule{ID: "MCPX3003", Name: "SessionNotRecovered", Short: "A call on the new session failed after the drill", Help: "check the server's session handling and proxyd's log"}
	ruleRefreshRequests  = report.Rule{ID: "MCPX3101", Name: "RefreshRace", Short: "Concurrent callers at token expiry did not share exactly one refresh", Help: "one token request per expiry is right; more revoke the grant at authorization servers with reuse detection"}
	ruleRefreshCalls     = report.Rule{ID: "MCPX3102", Name: "RefreshCallsFailed", Short: "Calls failed while the token was refreshed", Help: "see the drill's notes and the authorization server's answer"}
	ruleRefreshGrantLost = report.Rule{ID: "MCPX3103", Name: "RefreshGrantLost", Short: "The grant no longer works after the refresh", Help: "sign in again with 'mcpx login SERVER' and check the authorization server's refresh-token rotation"}
)

// check is a report check that passes when ok, else fails as rule.
func check(name string, ok bool, msg string, rule report.Rule) report.Check {
	c := report.Check{Name: name, Status: report.Pass, Message: msg}
	if !ok {
		c.Status, c.Rule = report.Fail, &rule
	}
	return c
}

// serverURL is the (redacted) URL of a drilled server as proxyd reports
// it; "" when proxyd does not say.
func serverURL(c *cli.Context, name string) string {
	st, err := newClient(c).Status(c.Context)
	if err != nil {
		return ""
	}
	for _, s := range st.Servers {
		if s.Name == name && looksLikeURL(s.Target) {
			return s.Target
		}
	}
	return ""
}

// sessionDrillRun describes a session drill for the report formats.
func sessionDrillRun(r *api.SessionDrillReport, url string, src *report.Source) report.Run {
	t := report.Target{Name: r.Server, URL: url, Source: src, Outcome: string(r.Verdict), Passed: r.Verdict != api.VerdictFail, DurationMS: r.SlowestMS}
	notes := redact.Control(strings.Join(r.Notes, "; "))
	if !r.Applicable {
		t.Checks = []report.Check{{Name: "applicable", Status: report.Skip, Message: notes}}
	} else {
		t.Checks = []report.Check{
			check("reinits", r.Reinits == 1, fmt.Sprintf("%d re-initialisations (expected 1); %s", r.Reinits, notes), ruleSessionReinits),
			check("reads", r.ReadsFailed == 0, fmt.Sprintf("%d of %d reads failed, %d retried", r.ReadsFailed, r.Reads, r.Retried), ruleSessionReads),
			check("after", r.AfterOK, "a call on the new session "+map[bool]string{true: "works", false: "failed"}[r.AfterOK], ruleSessionAfter),
		}
	}
	return report.Run{Tool: "mcpx drill session", Targets: []report.Target{t}}
}

// refreshDrillRun describes a refresh drill for the report formats.
func refreshDrillRun(r *api.RefreshDrillReport, url string, src *report.Source) report.Run {
	t := report.Target{Name: r.Server, URL: url, Source: src, Outcome: string(r.Verdict), Passed: r.Verdict == api.VerdictPass, DurationMS: r.P99MS}
	notes := redact.Control(strings.Join(r.Notes, "; "))
	t.Checks = []report.Check{
		check("token_requests", r.TokenRequests == 1, fmt.Sprintf("%d token requests for %d callers (expected 1); %s", r.TokenRequests, r.Callers, notes), ruleRefreshRequests),
		check("calls", r.Failed == 0, fmt.Sprintf("%d succeeded, %d failed", r.Succeeded, r.Failed), ruleRefreshCalls),
		check("grant", r.GrantIntact, "grant intact: "+yesNo(r.GrantIntact), ruleRefreshGrantLost),
	}
	return report.Run{Tool: "mcpx drill refresh", Targets: []report.Target{t}}
}
