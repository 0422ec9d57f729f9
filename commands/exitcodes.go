package commands

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// Exit codes. They are a contract (README "Exit codes", 'mcpx help
// exit-codes', both from exitCodes): never renumber.
const (
	ExitOK               = 0
	ExitFailure          = 1 // any other error
	ExitUsage            = 2 // bad flags, arguments or input
	ExitProxydNotRunning = 3 // the command needs proxyd and none answers
	ExitCallFailed       = 4 // mcpx call: the call failed or the tool returned isError
	ExitDrillFailed      = 5 // a drill's verdict is FAIL
	ExitAuthRequired     = 6 // not signed in / sign-in needed
	ExitConfig           = 7 // the config file is invalid
	ExitNotFound         = 8 // no such server, tool, prompt, resource or record
	ExitUnavailable      = 9 // unhealthy, not ready, or a drill could not run
	// 10-18: mcpx probe result codes (see probe.ExitCode).
	ExitProbeTargets = 19  // probe: several targets, --expect or --fail-on warn, and one did not pass
	ExitInterrupted  = 130 // mcpx call: cancelled with Ctrl-C
)

// exitCodes is the one table of exit codes, in order: 'mcpx help
// exit-codes' prints it and the README's "Exit codes" section must match it
// (TestExitCodesREADME).
var exitCodes = []struct {
	Code    string
	Meaning string
}{
	{"0", "success; for `probe`: `ok`, or `auth_required` without `--require-auth-ok`; for a drill: PASS, or N/A when the drill does not apply to the server's protocol era"},
	{"1", "any other error (the message names the cause)"},
	{"2", "usage: unknown command or flag, bad argument or value, arguments that do not match the tool's input schema, a name already taken"},
	{"3", "proxyd is not running (the message names the socket and `mcpx up`); `activity` and `auth status` then read its record and exit 0, `health` reads it and still exits 3, as `status -o json` does, printing the configured servers with `\"running\": false`; `activity follow` exits 3 when proxyd stops while it follows (unless `--retry`)"},
	{"4", "`call`, `read`, `prompt`, `rpc`, `skills`: the upstream failed the request (any class but `auth`), or the tool returned `isError: true`; `skills SERVER SKILL`: a file does not match its entry"},
	{"5", "a drill's verdict is FAIL"},
	{"6", "sign-in required: not signed in, the grant is gone, or a request failed with class `auth`"},
	{"7", "the config file is invalid (also `reload` of an invalid file: the running configuration stays)"},
	{"8", "no such server, tool, prompt, resource or activity record (with a did-you-mean when one is near)"},
	{"9", "unavailable: `health` finds a server not ready or degraded, a drill cannot run (server not ready, nothing to call), `status SERVER` or `tools SERVER` of a server in state `error`"},
	{"10", "`probe --require-auth-ok`: `auth_required`"},
	{"11–18", "`probe`: `auth_misconfigured` 11, `dns_failure` 12, `connection_unreachable` 13, `timeout` 14, `tls_certificate` 15, `tls_protocol` 16, `http_status` 17, `not_mcp` 18"},
	{"19", "`probe` with several targets, `--expect` or `--fail-on warn`: at least one target did not pass"},
	{"130", "`call` cancelled with Ctrl-C (the upstream was told)"},
}

// ExitCode maps an error returned by the app to the process exit code: the
// one place where a kind of failure becomes a number.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var coded *codedError
	if errors.As(err, &coded) {
		return coded.code
	}
	var ce cli.ExitCoder
	if errors.As(err, &ce) {
		// urfave/cli's own exits (an unknown command or help topic).
		return ExitUsage
	}
	if api.IsNotRunning(err) {
		return ExitProxydNotRunning
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		switch ae.Code {
		case api.CodeBadRequest:
			return ExitUsage
		case api.CodeNotFound:
			return ExitNotFound
		case api.CodeInvalidConfig:
			return ExitConfig
		case api.CodeAuthRequired:
			return ExitAuthRequired
		case api.CodeUnavailable:
			return ExitUnavailable
		}
	}
	var cfgErr *config.Error
	if errors.As(err, &cfgErr) {
		return ExitConfig
	}
	return ExitFailure
}

// callExit is the exit code of a failed call-like request (call, read,
// prompt, rpc) from its classification.
func callExit(e *api.CallError) int {
	switch {
	case e.NotFound != "":
		return ExitNotFound
	case e.ErrorClass == "auth":
		return ExitAuthRequired
	case e.ErrorClass == "proxy_policy" && e.FaultDomain == "client":
		return ExitUsage
	}
	return ExitCallFailed
}

func printExitCodes(w io.Writer) error {
	fmt.Fprintln(w, "Exit codes (stable; text and JSON output exit alike):")
	fmt.Fprintln(w)
	for _, e := range exitCodes {
		fmt.Fprintf(w, "  %-6s %s\n", e.Code, strings.ReplaceAll(e.Meaning, "`", ""))
	}
	return nil
}

// exitCodesMarkdown is the README's table.
func exitCodesMarkdown() string {
	var b strings.Builder
	b.WriteString("| code | meaning |\n|---|---|\n")
	for _, e := range exitCodes {
		fmt.Fprintf(&b, "| %s | %s |\n", e.Code, e.Meaning)
	}
	return b.String()
}
