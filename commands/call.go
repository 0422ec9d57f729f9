package commands

import (
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

var callCommand = &cli.Command{
	Name:      "call",
	Usage:     "call a tool through proxyd and print its result",
	ArgsUsage: "[SERVER | URL] TOOL [JSON | @FILE | - | KEY=VALUE ...] [-- COMMAND [ARGS...]]",
	Description: `Calls TOOL on SERVER through proxyd (recorded in the activity log like any
call). TOOL is the server's own name for it or the name MCP clients see
(see 'mcpx tools'); that exposed name also works alone, without SERVER.
Arguments are one JSON object (inline, @FILE, or - for stdin), or
KEY=VALUE pairs (positional or with --arg) typed by the tool's input
schema: a string property takes "123" as a string, a number property as
a number; other VALUEs are read as JSON when they parse. A key given twice
is an error. proxyd checks KEY=VALUE arguments against the schema before
sending: a mismatch exits 2 (error_class proxy_policy, fault_domain
client) in the schema's words. A JSON object is sent as written. Exits 4 when the call fails or the tool
reports isError, printing the error class and fault domain; 8 when there
is no such server or tool.

While the call runs, the upstream's progress shows on stderr (a bar on a
terminal, plain lines otherwise, nothing with -o json or yaml) and so do
its log messages of --log-level (default info) and above (the upstream
is asked for them; off asks for none). When the upstream asks for input
(elicitation), a terminal asks you field by field, checking each answer
against the requested schema; scripts answer with --elicit decline,
cancel, defaults (the schema's defaults) or @FILE (a JSON answer: the
content, or a whole result with "action"). Without a terminal or --elicit
the request is cancelled. A request for an LLM completion (sampling) is
refused: mcpx call has no model. Ctrl-C cancels the call upstream and
exits 130 once proxyd confirms; a second Ctrl-C exits at once.

A one-shot target needs no config entry: 'mcpx call URL TOOL ...', or a
stdio server's command after '--' ('mcpx call TOOL K=V -- npx server').
It runs through proxyd when it is up (recorded as an ad-hoc server) and
in-process otherwise, as stderr says.

Examples:
   mcpx call fixture echo text=hello
   mcpx call fixture__echo text=hello
   mcpx call fixture add '{"a": 2, "b": 3}' -o json
   mcpx call docs search --arg query="oauth refresh" --timeout 10s
   mcpx call everything trigger-elicitation-request --elicit @answer.json`,
	Flags: []cli.Flag{
		outputFlag,
		&cli.StringSliceFlag{Name: "arg", Aliases: []string{"a"}, Usage: "argument `KEY=VALUE` (repeatable)"},
		&cli.DurationFlag{Name: "timeout", Action: positiveTimeout, Usage: "give up on the call after `DURATION`", DefaultText: "the server's timeout, 60s"},
		saveFlag,
		&cli.StringFlag{Name: "elicit", Usage: "answer the upstream's requests for input: `decline|cancel|defaults|@FILE` (default: ask on a terminal)"},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "show the upstream's log messages of `LEVEL` and above: " + strings.Join(relay.LogLevels, ", ") + ", or off"},
	},
	BashComplete: completeCall,
	Action:       runCall,
}

func runCall(c *cli.Context) error {
	if c.NArg() < 1 {
		return usageErr("call needs TOOL, or SERVER and TOOL (see 'mcpx call --help')")
	}
	if _, err := format(c); err != nil {
		return err
	}
	if t, rest := adHocTarget(c, c.Args().Slice()); t != nil {
		return runCallAdHoc(c, t, rest)
	}
	// One name alone is the exposed name; so is a name followed by
	// arguments, which always hold '=' or are a JSON object.
	names := 2
	if c.NArg() == 1 || isArgument(c.Args().Get(1)) {
		names = 1
	}
	req := api.CallRequest{Tool: c.Args().Get(0)}
	if names == 2 {
		req.Server, req.Tool = c.Args().Get(0), c.Args().Get(1)
	}
	args, err := callArguments(c, req.Server, req.Tool, c.Args().Slice()[names:], c.StringSlice("arg"))
	if err != nil {
		return err
	}
	req.Arguments = args
	req.CheckSchema = !jsonArgument(c.Args().Slice()[names:], c.StringSlice("arg"))
	if d := c.Duration("timeout"); d > 0 {
		req.TimeoutMS = d.Milliseconds()
	}
	p := c.String("elicit")
	var fileAnswer json.RawMessage
	if path, ok := strings.CutPrefix(p, "@"); ok {
		if fileAnswer, err = readElicitFile(path); err != nil {
			return exitErr(ExitUsage, err)
		}
	} else if p != "" && p != "decline" && p != "cancel" && p != "defaults" {
		return usageErr("--elicit takes decline, cancel, defaults or @FILE, not %q", p)
	}
	switch l := c.String("log-level"); {
	case l == "off":
	case relay.LogLevelRank(l) < 0:
		return usageErr("--log-level takes %s or off, not %q", strings.Join(relay.LogLevels, ", "), l)
	default:
		req.LogLevel = l
	}
	cl := newClient(c)
	cl.Timeout = 10 * time.Minute
	res, cancelled, err := streamCall(c, cl, req, fileAnswer)
	if api.IsCode(err, api.CodeBadRequest) {
		return exitErr(ExitUsage, err)
	}
	if err != nil {
		return daemonErr(err)
	}
	if cancelled && res.Error != nil && res.Error.ErrorClass == "cancelled" {
		errorf(c, "call cancelled (the upstream was told)\n")
		return silentExit(ExitInterrupted)
	}
	if err := render(c, res, func(w io.Writer) error { return printToolResult(w, res.Result, c.String("save")) }); err != nil {
		return err
	}
	if res.Error != nil {
		if f, _ := format(c); f == "table" {
			errorf(c, "call failed: %s%s\n  error_class=%s fault_domain=%s", redact.Control(dedupeChain(res.Error.Message)), timeoutFlag(c, res.Error), res.Error.ErrorClass, res.Error.FaultDomain)
			if res.Error.UpstreamHTTPStatus != 0 {
				errorf(c, " upstream_http_status=%d", res.Error.UpstreamHTTPStatus)
			}
			errorf(c, "\n")
			if res.Error.Reason != "" {
				errorf(c, "  reason: %s\n", res.Error.Reason)
			}
			askedURLs(c, res.Error)
		}
		return silentExit(callExit(res.Error))
	}
	if res.IsError {
		if f, _ := format(c); f == "table" {
			errorf(c, "the tool reported an error (isError: true); error_class=tool_error fault_domain=upstream\n")
		}
		return silentExit(ExitCallFailed)
	}
	return nil
}

// askedURLs prints what a -32042 (URL elicitation required) asks of the
// user: pages to open, each with the server's words, before calling
// again. The server put them in the error's data, which the message
// does not show.
func askedURLs(c *cli.Context, e *api.CallError) {
	if e.JSONRPCCode != mcp.URL_ELICITATION_REQUIRED {
		return
	}
	var d struct {
		Elicitations []struct {
			URL     string `json:"url"`
			Message string `json:"message"`
		} `json:"elicitations"`
	}
	if json.Unmarshal(e.JSONRPCData, &d) != nil {
		return
	}
	for _, x := range d.Elicitations {
		if x.URL == "" {
			continue
		}
		errorf(c, "  the server asks you to open %s", redact.Control(x.URL))
		if x.Message != "" {
			errorf(c, " (%s)", redact.Control(x.Message))
		}
		errorf(c, "\n")
	}
	if len(d.Elicitations) > 0 {
		errorf(c, "  then call again\n")
	}
}

// isArgument tells a call argument (KEY=VALUE, a JSON object, @FILE or -
// for stdin) from a tool name.
func isArgument(s string) bool {
	return strings.Contains(s, "=") || strings.HasPrefix(strings.TrimSpace(s), "{") || s == "-" || strings.HasPrefix(s, "@")
}
