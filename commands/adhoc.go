package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
)

// One-shot targets: 'mcpx tools URL', 'mcpx call URL TOOL ...', and with a
// stdio command after '--' ('mcpx tools -- npx server',
// 'mcpx call TOOL K=V -- npx server'). They run through proxyd when it is
// up (recorded as an ad-hoc server) and in-process otherwise, said on
// stderr.

// stdioCommandKey is where preflight leaves the words after '--' of call
// and tools (urfave/cli would merge them into the arguments).
const stdioCommandKey = "stdio-command"

// takesStdioCommand are the commands whose '--' starts a stdio command.
var takesStdioCommand = map[string]bool{"call": true, "tools": true}

// isURL: an absolute http(s) URL given where a SERVER goes.
func isURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// adHocTarget is the one-shot target of the command line, if any: a URL
// as the first argument (then dropped from args), or a stdio command.
func adHocTarget(c *cli.Context, args []string) (*api.AdHocTarget, []string) {
	if cmd, ok := c.App.Metadata[stdioCommandKey].([]string); ok && len(cmd) > 0 {
		return &api.AdHocTarget{Command: cmd}, args
	}
	if len(args) > 0 && isURL(args[0]) {
		return &api.AdHocTarget{URL: args[0]}, args[1:]
	}
	return nil, args
}

func describeTarget(t *api.AdHocTarget) string {
	if t.URL != "" {
		return redact.URL(t.URL)
	}
	return redact.Text(strings.Join(t.Command, " "))
}

// runAdHoc sends one request to a one-shot target: through proxyd, else
// in-process.
func runAdHoc(c *cli.Context, t *api.AdHocTarget, method string, params json.RawMessage) (*api.RPCResponse, error) {
	res, err := sendRPC(c, api.RPCRequest{Target: t, Method: method, Params: params})
	if err == nil {
		errorf(c, "%s: through proxyd as ad-hoc server %s (in 'mcpx activity')\n", describeTarget(t), res.Server)
		return res, nil
	}
	if !api.IsNotRunning(err) {
		return nil, err
	}
	errorf(c, "%s: proxyd is not running; connecting in-process (not recorded)\n", describeTarget(t))
	return inProcess(c, t, method, params)
}

// inProcess connects to t with the MCP library, sends one request and
// closes: the same answer shape as proxyd's, classified by the same rules.
func inProcess(c *cli.Context, t *api.AdHocTarget, method string, params json.RawMessage) (*api.RPCResponse, error) {
	timeout := c.Duration("timeout")
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(c.Context, timeout)
	defer cancel()
	start := time.Now()
	res := &api.RPCResponse{Server: "adhoc", Method: method}
	raw, err := oneRequest(ctx, t, method, params)
	res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		cl := callerr.Classify(callerr.Input{Err: err, CallerCtxErr: ctx.Err()})
		if cl.Class == "" {
			cl.Class, cl.Domain = callerr.ClassNetwork, callerr.DomainUpstream
		}
		res.Error = &api.CallError{Message: redact.Text(err.Error()), ErrorClass: cl.Class, FaultDomain: cl.Domain, UpstreamHTTPStatus: cl.HTTPStatus, Reason: cl.Reason}
		return res, nil
	}
	res.Result = raw
	return res, nil
}

func oneRequest(ctx context.Context, t *api.AdHocTarget, method string, params json.RawMessage) (json.RawMessage, error) {
	var cl *client.Client
	var err error
	if t.URL != "" {
		cl, err = client.NewStreamableHttpClient(t.URL)
	} else {
		// The user's own command, run as they would run it.
		cl, err = client.NewStdioMCPClient(t.Command[0], os.Environ(), t.Command[1:]...)
	}
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if err := cl.Start(ctx); err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "mcpx", Version: Version}
	if _, err := cl.Initialize(ctx, init); err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	var out any
	switch method {
	case string(mcp.MethodToolsList):
		out, err = cl.ListTools(ctx, mcp.ListToolsRequest{})
	case string(mcp.MethodToolsCall):
		var p struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = p.Name, p.Arguments
		out, err = cl.CallTool(ctx, req)
	default:
		return nil, fmt.Errorf("%s is not sent in-process", method)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// runCallAdHoc is 'mcpx call URL TOOL ...' and 'mcpx call TOOL ... --
// COMMAND': the arguments are read as for a configured server, without
// the schema's typing (the tool is not known before the call).
func runCallAdHoc(c *cli.Context, t *api.AdHocTarget, args []string) error {
	if len(args) < 1 {
		return usageErr("call of a one-shot target needs TOOL (mcpx call URL TOOL [ARGS], mcpx call TOOL [ARGS] -- COMMAND)")
	}
	arguments, err := parseArguments(args[1:], c.StringSlice("arg"), func() map[string][]string { return nil }, c.App.Reader)
	if err != nil {
		return err
	}
	params, err := json.Marshal(map[string]any{"name": args[0], "arguments": json.RawMessage(orEmptyObject(arguments))})
	if err != nil {
		return err
	}
	res, err := runAdHoc(c, t, "tools/call", params)
	if err != nil {
		return err
	}
	if err := rpcOutcome(c, res, func(w io.Writer) error { return printToolResult(w, res.Result, c.String("save")) }); err != nil {
		return err
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	if json.Unmarshal(res.Result, &r) == nil && r.IsError {
		if f, _ := format(c); f == "table" {
			errorf(c, "the tool reported an error (isError: true); error_class=tool_error fault_domain=upstream\n")
		}
		return silentExit(ExitCallFailed)
	}
	return nil
}

func orEmptyObject(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("{}")
	}
	return raw
}
