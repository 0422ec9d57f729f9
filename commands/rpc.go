package commands

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

var rpcCommand = &cli.Command{
	Name:      "rpc",
	Usage:     "send one MCP request of any method to SERVER through proxyd",
	ArgsUsage: "SERVER METHOD [JSON | @FILE | -]",
	Description: `Sends METHOD with the JSON params object (inline, @FILE, or - for stdin)
over proxyd's connection to SERVER and prints the result as it came. It is
classified and recorded in the activity log like a call (the record's
tool is "METHOD NAME"). tools/call goes through the same path as
'mcpx call'. initialize and notifications belong to proxyd's connection
and are refused. Exits 4 when the upstream answers with an error.

Examples:
   mcpx rpc docs ping
   mcpx rpc docs resources/templates/list
   mcpx rpc docs completion/complete '{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"who","value":"a"}}'`,
	Flags: []cli.Flag{
		outputFlag,
		&cli.DurationFlag{Name: "timeout", Action: positiveTimeout, Usage: "give up after `DURATION`", DefaultText: "the server's call timeout"},
	},
	BashComplete: completeServers,
	Action:       runRPC,
}

func runRPC(c *cli.Context) error {
	if c.NArg() < 2 || c.NArg() > 3 {
		return usageErr("rpc needs SERVER and METHOD, and at most one JSON params object (see 'mcpx rpc --help')")
	}
	if _, err := format(c); err != nil {
		return err
	}
	req := api.RPCRequest{Server: c.Args().Get(0), Method: c.Args().Get(1)}
	if c.NArg() == 3 {
		raw, err := readJSONArgument(c.App.Reader, c.Args().Get(2))
		if err != nil {
			return exitErr(ExitUsage, err)
		}
		req.Params = raw
	}
	res, err := sendRPC(c, req)
	if err != nil {
		return err
	}
	return rpcOutcome(c, res, func(w io.Writer) error {
		fmt.Fprintln(w, prettyJSON(res.Result))
		return nil
	})
}

// sendRPC posts one request through proxyd.
func sendRPC(c *cli.Context, req api.RPCRequest) (*api.RPCResponse, error) {
	if d := c.Duration("timeout"); d > 0 {
		req.TimeoutMS = d.Milliseconds()
	}
	cl := newClient(c)
	cl.Timeout = 10 * time.Minute
	res, err := cl.RPC(c.Context, req)
	if err != nil {
		return nil, daemonErr(err)
	}
	return res, nil
}

// rpcOutcome prints a request's result (table by table, else the whole
// response) and turns a failure into its exit code, as mcpx call does.
func rpcOutcome(c *cli.Context, res *api.RPCResponse, table func(w io.Writer) error) error {
	if res.Error == nil {
		if err := render(c, res, table); err != nil {
			return err
		}
		if res.Method == "tools/call" && toolReportedError(res.Result) {
			// As for mcpx call: the tool's own error fails the command.
			if f, _ := format(c); f == "table" {
				errorf(c, "the tool reported an error (isError: true); error_class=tool_error fault_domain=upstream\n")
			}
			return silentExit(ExitCallFailed)
		}
		return nil
	}
	if err := render(c, res, func(io.Writer) error { return nil }); err != nil {
		return err
	}
	if f, _ := format(c); f == "table" {
		errorf(c, "%s failed: %s%s\n  error_class=%s fault_domain=%s", res.Method, redact.Control(dedupeChain(res.Error.Message)), timeoutFlag(c, res.Error),
			res.Error.ErrorClass, res.Error.FaultDomain)
		if res.Error.UpstreamHTTPStatus != 0 {
			errorf(c, " upstream_http_status=%d", res.Error.UpstreamHTTPStatus)
		}
		errorf(c, "\n")
	}
	return silentExit(callExit(res.Error))
}

// decodeResult reads a result into v, saying what came instead.
func decodeResult(res *api.RPCResponse, v any) error {
	if err := json.Unmarshal(res.Result, v); err != nil {
		return fmt.Errorf("%s: the server's result is not what MCP says: %v", res.Method, err)
	}
	return nil
}

// toolReportedError says whether a tools/call result is the tool's own
// error (isError: true).
func toolReportedError(result json.RawMessage) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(result, &r) == nil && r.IsError
}
