package commands

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

var callCommand = &cli.Command{
	Name:      "call",
	Usage:     "call a tool through proxyd and print its result",
	ArgsUsage: "[SERVER] TOOL [JSON | KEY=VALUE ...]",
	Description: `Calls TOOL on SERVER through proxyd (recorded in the activity log like any
call). TOOL is the server's own name for it or the name MCP clients see
(see 'mcpx tools'); that exposed name also works alone, without SERVER.
Arguments are one JSON object, or KEY=VALUE pairs (positional or
with --arg) whose VALUE is read as JSON when it parses (numbers, true,
{"a":1}) and as a string otherwise. Exits 4 when the call fails or the
tool reports isError, printing the error class and fault domain.

Examples:
   mcpx call fixture echo text=hello
   mcpx call fixture__echo text=hello
   mcpx call fixture add '{"a": 2, "b": 3}' -o json
   mcpx call docs search --arg query="oauth refresh" --timeout 10s`,
	Flags: []cli.Flag{
		outputFlag,
		&cli.StringSliceFlag{Name: "arg", Aliases: []string{"a"}, Usage: "argument `KEY=VALUE` (repeatable)"},
		&cli.DurationFlag{Name: "timeout", Usage: "call timeout (default: the server's configured timeout, 60s)"},
	},
	BashComplete: completeServers,
	Action:       runCall,
}

func runCall(c *cli.Context) error {
	if c.NArg() < 1 {
		return usageErr("call needs TOOL, or SERVER and TOOL (see 'mcpx call --help')")
	}
	if _, err := format(c); err != nil {
		return err
	}
	// One name alone is the exposed name; so is a name followed by
	// arguments, which always hold '=' or are a JSON object.
	names := 2
	if c.NArg() == 1 || isArgument(c.Args().Get(1)) {
		names = 1
	}
	args, err := callArguments(c.Args().Slice()[names:], c.StringSlice("arg"))
	if err != nil {
		return exitErr(ExitUsage, err)
	}
	req := api.CallRequest{Tool: c.Args().Get(0), Arguments: args}
	if names == 2 {
		req.Server, req.Tool = c.Args().Get(0), c.Args().Get(1)
	}
	if d := c.Duration("timeout"); d > 0 {
		req.TimeoutMS = d.Milliseconds()
	}
	cl := newClient(c)
	cl.Timeout = 10 * time.Minute
	res, err := cl.Call(c.Context, req)
	if api.IsCode(err, api.CodeBadRequest) {
		return exitErr(ExitUsage, err)
	}
	if err != nil {
		return daemonErr(err)
	}
	if err := render(c, res, func(w io.Writer) error { return printCallResult(w, res) }); err != nil {
		return err
	}
	if res.Error != nil {
		if f, _ := format(c); f == "table" {
			errorf(c, "call failed: %s\n  error_class=%s fault_domain=%s", sanitize(res.Error.Message), res.Error.ErrorClass, res.Error.FaultDomain)
			if res.Error.UpstreamHTTPStatus != 0 {
				errorf(c, " upstream_http_status=%d", res.Error.UpstreamHTTPStatus)
			}
			errorf(c, "\n")
			if res.Error.Reason != "" {
				errorf(c, "  reason: %s\n", res.Error.Reason)
			}
		}
		if res.Error.ErrorClass == "auth" {
			return silentExit(ExitAuthRequired)
		}
		return silentExit(ExitCallFailed)
	}
	if res.IsError {
		if f, _ := format(c); f == "table" {
			errorf(c, "the tool reported an error (isError: true); error_class=tool_error fault_domain=upstream\n")
		}
		return silentExit(ExitCallFailed)
	}
	return nil
}

// isArgument tells a call argument (KEY=VALUE or a JSON object) from a
// tool name.
func isArgument(s string) bool {
	return strings.Contains(s, "=") || strings.HasPrefix(strings.TrimSpace(s), "{")
}

// callArguments builds the arguments object from a JSON object or
// KEY=VALUE pairs.
func callArguments(pos, flags []string) (json.RawMessage, error) {
	if len(pos) == 1 && strings.HasPrefix(strings.TrimSpace(pos[0]), "{") {
		if len(flags) > 0 {
			return nil, fmt.Errorf("give arguments as one JSON object or as KEY=VALUE pairs, not both")
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(pos[0]), &m); err != nil {
			return nil, fmt.Errorf("arguments are not a JSON object: %v", err)
		}
		return json.RawMessage(pos[0]), nil
	}
	m := map[string]json.RawMessage{}
	for _, kv := range append(append([]string{}, pos...), flags...) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("argument %q is not KEY=VALUE (or pass one JSON object)", kv)
		}
		if json.Valid([]byte(v)) && v != "" {
			m[k] = json.RawMessage(v)
		} else {
			b, _ := json.Marshal(v)
			m[k] = b
		}
	}
	if len(m) == 0 {
		return nil, nil
	}
	return json.Marshal(m)
}

// printCallResult prints a result's content for people: text as text,
// other content as a one-line summary, structured content as JSON.
func printCallResult(w io.Writer, res *api.CallResponse) error {
	if res.Result == nil {
		return nil
	}
	var r struct {
		Content []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			MimeType string `json:"mimeType"`
			Resource *struct {
				URI string `json:"uri"`
			} `json:"resource"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal(res.Result, &r); err != nil {
		fmt.Fprintln(w, prettyJSON(res.Result))
		return nil
	}
	for _, c := range r.Content {
		switch c.Type {
		case "text":
			fmt.Fprintln(w, sanitize(c.Text))
		case "image", "audio":
			fmt.Fprintf(w, "[%s content, %s]\n", c.Type, c.MimeType)
		case "resource", "resource_link":
			uri := ""
			if c.Resource != nil {
				uri = c.Resource.URI
			}
			fmt.Fprintf(w, "[%s %s]\n", c.Type, uri)
		default:
			fmt.Fprintf(w, "[%s content]\n", c.Type)
		}
	}
	if len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null" && len(r.Content) == 0 {
		fmt.Fprintln(w, prettyJSON(r.StructuredContent))
	}
	return nil
}
