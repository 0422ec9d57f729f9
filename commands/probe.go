package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/editdistance"
	"github.com/mcpx-dev/mcpx/internal/report"
	"github.com/mcpx-dev/mcpx/probe"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

var probeCommand = &cli.Command{
	Name:      "probe",
	Usage:     "diagnose a connection step by step: DNS, TCP, TLS, HTTP, MCP, OAuth",
	ArgsUsage: "TARGET...",
	Description: `Checks a remote MCP server layer by layer and names the true cause of a
failure, in the terms of the layer that failed, with a hint for the fix.
TARGET is a URL or the name of a configured server (then its headers, CA
file, transport, protocol and OAuth overrides apply).

Steps: dns (addresses), tcp (which address connected), tls (version,
cipher, ALPN, chain, days to expiry, verification), http (status, server,
redirects, content type), mcp (era, protocol version, server, capabilities,
session, tools), auth (for a protected server: WWW-Authenticate, RFC 9728
resource metadata, RFC 8414/OpenID metadata, and what a client needs).
After a hard failure later steps are skipped.

Runs through proxyd when it is up, in-process otherwise; stderr says
which, and the verdict is the same either way. A configured server named
as TARGET is resolved by whoever runs the probe: proxyd from the
configuration it runs with (and with the sign-in token it holds), the
in-process probe from --config. Header values, tokens, URL userinfo and
token-like query parameters never appear in the output.

The table draws the steps, and the discovery fetches inside auth, on one
time axis (--waterfall=false leaves it out; JSON carries the same timings
as start_ms and duration_ms).

Several targets (URLs or server names), --all (every configured network
server) or --file FILE are probed concurrently (--parallel) and summed up
in one table. A target passes when its result is ok or auth_required, or
the code it expects (--expect, or expect: in the file); with --fail-on
warn a step warning fails it too. A targets file:

   targets:
     - url: https://mcp.example.com/mcp
       name: example
       expect: auth_required
       headers: {X-Api-Key: "${env:EXAMPLE_KEY}"}   # or ${file:PATH}
     - server: docs                                 # a configured server

-o sarif writes SARIF 2.1.0 (one rule per kind of finding, located at the
line that declares the target in the targets file or the config, as code
scanning wants), -o junit JUnit XML (one test case per target and step).
In GitHub Actions (GITHUB_ACTIONS=true) each finding is also an
annotation: on stdout under the table, on stderr when stdout carries a
report.

Exit codes: 0 ok or auth_required (10 with --require-auth-ok),
11 auth_misconfigured, 12 dns_failure, 13 connection_unreachable,
14 timeout, 15 tls_certificate, 16 tls_protocol, 17 http_status, 18 not_mcp;
with several targets, --expect or --fail-on warn: 0 when every target
passed, else 19.

Examples:
   mcpx probe https://mcp.example.com/mcp
   mcpx probe docs                         # a configured server
   mcpx probe https://localhost:8443/mcp --ca-file ./ca.pem
   mcpx probe URL --header 'X-Api-Key: ...' -o json | jq .result
   mcpx probe URL --require-auth-ok && echo signed in
   mcpx probe --all --fail-on warn
   mcpx probe --file targets.yaml -o sarif > probe.sarif
   mcpx probe URL1 URL2 --expect ok -o junit > probe.xml`,
	Flags: []cli.Flag{
		&cli.DurationFlag{Name: "timeout", Action: positiveTimeout, Value: probe.DefaultTimeout, Usage: "`DURATION` per step; the whole probe gets 3x"},
		&cli.StringSliceFlag{Name: "header", Aliases: []string{"H"}, Usage: "extra request header `K:V` (repeatable; the value is never printed)"},
		&cli.StringFlag{Name: "ca-file", Usage: "PEM `FILE` of CAs to trust in addition to the system store"},
		&cli.StringFlag{Name: "transport", Usage: "`TRANSPORT`: streamable-http or sse", DefaultText: "the config's, else streamable-http"},
		&cli.StringFlag{Name: "protocol", Usage: "`PROTOCOL`: auto, legacy or modern", DefaultText: "the config's, else auto"},
		&cli.BoolFlag{Name: "require-auth-ok", Usage: "exit 10 when the server needs a sign-in (auth_required)"},
		&cli.BoolFlag{Name: "show-certs", Usage: "print every certificate the server presented, with its PEM (in -o json too)"},
		&cli.BoolFlag{Name: "waterfall", Value: true, Usage: "draw the steps on a time axis under the table (--waterfall=false: table only)"},
		&cli.BoolFlag{Name: "all", Usage: "probe every configured network server, each with its settings"},
		&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "probe the targets listed in `FILE` (YAML: url or server, expect, headers by ${env:NAME} or ${file:PATH})"},
		&cli.IntFlag{Name: "parallel", Aliases: []string{"p"}, Value: 4, Usage: "probe at most `N` targets at a time (1-32)"},
		&cli.StringFlag{Name: "expect", Usage: "the result `CODE` every target must produce (ok, auth_required, dns_failure, ...); a targets file's expect wins"},
		&cli.StringFlag{Name: "fail-on", Value: "fail", Usage: "`LEVEL` that fails a target: fail, or warn (a step warning fails it too)"},
		reportOutputFlag,
	},
	BashComplete: completeServers,
	Action:       runProbe,
}

func runProbe(c *cli.Context) error {
	f, err := reportFormat(c)
	if err != nil {
		return err
	}
	targets, err := probeTargets(c)
	if err != nil {
		return err
	}
	b, err := runProbeBatch(c, targets)
	if err != nil {
		return err
	}
	if !c.Bool("show-certs") {
		for _, t := range b.Targets {
			withoutPEM(t.Report)
		}
	}
	// One target named on the command line prints its report as it
	// always has; several print the batch.
	single := c.NArg() == 1 && len(targets) == 1
	run := func() report.Run { return probeRun(b, targets) }
	colour := colorEnabled(c)
	if single && f != "sarif" && f != "junit" {
		rep := b.Targets[0].Report
		err = renderReport(c, rep, func(w io.Writer) error {
			if err := probeTable(w, rep, colour, c.Bool("waterfall")); err != nil {
				return err
			}
			printCertificates(w, rep, c.Bool("show-certs"))
			if why := b.Targets[0].Why; why != "" && targets[0].Expect != "" {
				fmt.Fprintf(w, "expect: %s\n", why)
			}
			return nil
		}, run)
		if t := b.Targets[0]; err == nil && f != "table" && !t.Passed && t.Why != "" {
			// The report on stdout is the probe's own, unchanged; why it
			// fails this run (--expect, --fail-on) goes beside it.
			errorf(c, "probe failed: %s\n", t.Why)
		}
	} else {
		err = renderReport(c, b, func(w io.Writer) error { return batchTable(w, b, colour) }, run)
	}
	if err != nil {
		return err
	}
	if code := batchExitCode(b, single); code != ExitOK {
		return silentExit(code)
	}
	return nil
}

// probeRequest builds the request from TARGET and the flags. A configured
// server is named, not resolved: whoever runs the probe resolves it from
// its own configuration (proxyd's, or the config file in-process).
func probeRequest(c *cli.Context, target string) (api.ProbeRequest, error) {
	var req api.ProbeRequest
	switch {
	case looksLikeURL(target):
		req.Target = strings.TrimSpace(target)
	case serverNameRE.MatchString(target):
		req.Server = target
	case looksLikeHost(target):
		// A mistyped URL may carry credentials: never echoed.
		return req, usageErr("TARGET has no scheme: write it as https://HOST/PATH (or http:// on loopback)")
	default:
		return req, usageErr("TARGET is neither an absolute http(s) URL nor a configured server name (see 'mcpx servers')")
	}
	timeout := c.Duration("timeout")
	if timeout <= 0 {
		return req, usageErr("--timeout must be positive")
	}
	req.TimeoutMS, req.OverallMS = timeout.Milliseconds(), 3*timeout.Milliseconds()
	headers, err := parseHeaders(c.StringSlice("header"))
	if err != nil {
		return req, err
	}
	req.Headers = headers
	if f := c.String("ca-file"); f != "" {
		req.CAFile = f
		if abs, err := filepath.Abs(f); err == nil {
			req.CAFile = abs // proxyd resolves paths from its own directory
		}
	}
	req.Transport, req.Protocol = c.String("transport"), c.String("protocol")
	if err := probe.CheckRequest(req); err != nil {
		return req, usageErr("--%v", err)
	}
	return req, nil
}

var serverNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// looksLikeURL accepts absolute http(s) URLs with a host.
func looksLikeURL(s string) bool {
	u, err := url.Parse(strings.TrimSpace(s))
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// runProbeSomewhere asks proxyd, and probes in-process when proxyd is not
// running or does not serve probes. The note says which, for stderr. A
// request proxyd refuses (an unknown server) is a usage error: its
// configuration is the one that counts while it runs.
func runProbeSomewhere(c *cli.Context, req api.ProbeRequest) (*probe.Report, string, error) {
	cl := newClient(c)
	cl.Timeout = time.Duration(req.OverallMS)*time.Millisecond + 5*time.Second
	ctx, cancel := context.WithTimeout(c.Context, cl.Timeout)
	defer cancel()
	rep, err := cl.Probe(ctx, req)
	if err == nil && rep.Result.Code != "" {
		if rep.Mode == "" {
			rep.Mode = probe.ModeProxyd
		}
		return rep, "probe: ran through proxyd", nil
	}
	var why string
	var apiErr *api.Error
	errors.As(err, &apiErr)
	switch {
	case api.IsNotRunning(err):
		why = "proxyd is not running"
	case api.IsCode(err, api.CodeNoRoute) || (apiErr != nil && apiErr.Status == http.StatusMethodNotAllowed):
		why = "this proxyd does not serve probes"
	case api.IsCode(err, api.CodeNotFound):
		return nil, "", err
	case api.IsCode(err, api.CodeBadRequest):
		return nil, "", usageErr("%s", apiErr.Message)
	case err == nil:
		why = "proxyd returned an empty report"
	default:
		why = "proxyd could not run it"
	}
	var cfgErr error
	var names []string
	opts, err := probe.NewOptions(req, func(name string) (*config.Server, bool) {
		cfg, err := config.Load(configPath(c))
		if err != nil {
			cfgErr = exitErr(ExitConfig, fmt.Errorf("TARGET %q is not a URL and the config cannot be read: %w", name, err))
			return nil, false
		}
		for _, s := range cfg.Servers {
			names = append(names, s.Name)
		}
		return cfg.Server(name)
	})
	var unknown *probe.UnknownServerError
	switch {
	case cfgErr != nil:
		return nil, "", cfgErr
	case errors.As(err, &unknown):
		return nil, "", exitErr(ExitNotFound, fmt.Errorf("TARGET %q is neither an absolute http(s) URL nor a configured server%s (see 'mcpx servers')", unknown.Name, editdistance.DidYouMean(unknown.Name, names)))
	case err != nil:
		return nil, "", usageErr("%v", err)
	}
	note := "probe: ran in-process (" + why + ")"
	if req.Server != "" {
		note += "; a stored sign-in token is used only through proxyd"
	}
	return probe.Run(c.Context, opts), note, nil
}

// probeTable prints one line per step, then the verdict and the hint.
func probeTable(w io.Writer, rep *probe.Report, colour, waterfall bool) error {
	fmt.Fprintf(w, "Probing %s (%s)\n\n", shown(rep.Target), rep.Mode)
	t := newTable(w, "STEP", "STATUS", "TIME", "DETAIL")
	for _, s := range rep.Steps {
		tm := "-"
		if s.Status != probe.StatusSkip {
			tm = fmt.Sprintf("%.1fms", s.DurationMS)
		}
		_ = t.Append([]string{s.ID, strings.ToUpper(string(s.Status)), tm, s.Detail})
	}
	if err := t.Render(); err != nil {
		return err
	}
	if waterfall {
		if err := probeWaterfall(w, rep, colour); err != nil {
			return err
		}
	}
	res := rep.Result
	verdict := res.Code
	var extra []string
	if res.Reason != "" {
		extra = append(extra, res.Reason)
	}
	if res.HTTPStatus != 0 {
		extra = append(extra, fmt.Sprintf("HTTP %d", res.HTTPStatus))
	}
	if len(extra) > 0 {
		verdict += " (" + strings.Join(extra, ", ") + ")"
	}
	col := red
	switch res.Code {
	case probe.CodeOK:
		col = green
	case probe.CodeAuthRequired:
		col = yellow
	}
	fmt.Fprintf(w, "\nresult: %s: %s\n", color(colour, col, verdict), shown(res.Message))
	fmt.Fprintf(w, "hint: %s\n", shown(res.Hint))
	return nil
}
