package commands

import (
	"strings"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/internal/report"
	"github.com/mcpx-dev/mcpx/probe"
)

// probeRules are the kinds of finding of the probe, one per result code
// and one per step that can warn. The ids are stable: never renumber.
var probeRules = map[string]report.Rule{
	probe.CodeAuthRequired:          {ID: "MCPX1001", Name: "AuthRequired", Short: "The server needs a sign-in and none is stored", Help: "sign in with 'mcpx login SERVER' (or drop --require-auth-ok)"},
	probe.CodeAuthMisconfigured:     {ID: "MCPX1002", Name: "AuthMisconfigured", Short: "The server's OAuth discovery chain is broken", Help: "fix the metadata link named in the auth step, or set the oauth overrides of the server"},
	probe.CodeDNSFailure:            {ID: "MCPX1003", Name: "DnsFailure", Short: "The host name did not resolve", Help: "check the host name and the resolver"},
	probe.CodeConnectionUnreachable: {ID: "MCPX1004", Name: "ConnectionUnreachable", Short: "The connection was refused, reset or not routed", Help: "check that the server runs and listens on the URL's port, and firewalls between"},
	probe.CodeTimeout:               {ID: "MCPX1005", Name: "Timeout", Short: "A step exceeded the time limit", Help: "check the network path and the server's load; raise --timeout if the server is slow by design"},
	probe.CodeTLSCertificate:        {ID: "MCPX1006", Name: "TlsCertificate", Short: "The server's certificate was rejected", Help: "renew or fix the certificate, or trust its CA with --ca-file"},
	probe.CodeTLSProtocol:           {ID: "MCPX1007", Name: "TlsProtocol", Short: "The TLS handshake failed below the certificate", Help: "check that the port speaks TLS and shares a version and cipher with clients"},
	probe.CodeHTTPStatus:            {ID: "MCPX1008", Name: "HttpStatus", Short: "The endpoint answered with an HTTP status that explains the failure", Help: "check the URL's path and the gateway in front of the server"},
	probe.CodeNotMCP:                {ID: "MCPX1009", Name: "NotMcp", Short: "The endpoint answered, but not as an MCP server", Help: "check the URL: it must be the MCP endpoint itself"},
	probe.CodeInvalidTarget:         {ID: "MCPX1010", Name: "InvalidTarget", Short: "The target is not a usable http(s) URL", Help: "give an absolute http:// or https:// URL"},
}

var (
	ruleUnexpected  = report.Rule{ID: "MCPX1011", Name: "UnexpectedOutcome", Short: "The probe's result differs from the expected one", Help: "see the target's result; update the expectation if the change is intended"}
	ruleProbeFailed = report.Rule{ID: "MCPX1000", Name: "ProbeFailed", Short: "The probe failed", Help: "see the target's result and hint"}
)

// probeWarnRules are the warnings of each step.
var probeWarnRules = map[string]report.Rule{
	probe.StepDNS:  {ID: "MCPX2001", Name: "DnsWarning", Short: "The DNS step has a warning", Help: "see the dns step's detail"},
	probe.StepTCP:  {ID: "MCPX2002", Name: "TcpWarning", Short: "The TCP step has a warning", Help: "see the tcp step's detail"},
	probe.StepTLS:  {ID: "MCPX2003", Name: "TlsWarning", Short: "The TLS step has a warning (e.g. a certificate close to expiry)", Help: "see the tls step's detail; renew certificates before they expire"},
	probe.StepHTTP: {ID: "MCPX2004", Name: "HttpWarning", Short: "The HTTP step has a warning", Help: "see the http step's detail"},
	probe.StepMCP:  {ID: "MCPX2005", Name: "McpWarning", Short: "The MCP handshake succeeded with a warning", Help: "see the mcp step's detail (tools/list, session handling)"},
	probe.StepAuth: {ID: "MCPX2006", Name: "AuthWarning", Short: "The OAuth discovery chain works with a warning", Help: "see the auth step's detail and lint findings"},
}

func probeRule(code string) *report.Rule {
	if r, ok := probeRules[code]; ok {
		return &r
	}
	r := ruleProbeFailed
	return &r
}

// probeRun describes a batch for the report formats: one target per
// probed endpoint, one check per step. A step that failed as expected
// passes; a target that missed its expectation without a failed step
// gets a failed "result" check.
func probeRun(b *probe.Batch, targets []probeTarget) report.Run {
	run := report.Run{Tool: "mcpx probe", FailOnWarn: b.Summary.FailOn == "warn"}
	for i, bt := range b.Targets {
		rep := bt.Report
		warnedOnly := strings.HasPrefix(bt.Why, warnedWhy)
		t := report.Target{Name: bt.Name, URL: rep.Target, Outcome: rep.Result.Code, Passed: bt.Passed || warnedOnly, DurationMS: reportSpan(rep)}
		if i < len(targets) {
			t.Source = targets[i].Source
		}
		failed := false
		for _, s := range rep.Steps {
			ch := report.Check{Name: s.ID, DurationMS: s.DurationMS, Message: redact.Control(s.Detail)}
			switch s.Status {
			case probe.StatusOK:
				ch.Status = report.Pass
			case probe.StatusSkip:
				ch.Status = report.Skip
			case probe.StatusWarn:
				ch.Status = report.Warn
				r := probeWarnRules[s.ID]
				ch.Rule = &r
			case probe.StatusFail:
				if bt.Passed {
					ch.Status = report.Pass
					ch.Message = "failed as expected (" + rep.Result.Code + "): " + ch.Message
					break
				}
				ch.Status = report.Fail
				ch.Rule = probeRule(rep.Result.Code)
				ch.Message = redact.Control(rep.Result.Message) + " (" + rep.Result.Code + "); hint: " + redact.Control(rep.Result.Hint)
				failed = true
			}
			t.Checks = append(t.Checks, ch)
		}
		if !bt.Passed && !failed {
			rule := probeRule(rep.Result.Code)
			switch {
			case bt.Expect != "":
				rule = &ruleUnexpected
			case warnedOnly:
				rule = nil // the warned steps are the findings
			}
			if rule != nil {
				t.Checks = append(t.Checks, report.Check{Name: "result", Status: report.Fail, Message: redact.Control(bt.Why), Rule: rule})
			}
		}
		run.Targets = append(run.Targets, t)
	}
	return run
}
