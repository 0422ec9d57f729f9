package commands

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

var toolsCommand = &cli.Command{
	Name:      "tools",
	Usage:     "list the tools of every server, or of one",
	ArgsUsage: "[SERVER | URL | -- COMMAND [ARGS...]]",
	Description: `Lists tools as MCP clients see them through proxyd: the exposed name
(the server's prefix, <server>__ by default, and the tool's own name),
whether the tool is read-only or destructive, and its description. A tool
whose name another server already exposes is marked "left out", and so
are the tools of a server that is not ready (listed when it last was):
clients see neither. -o json includes each tool's input schema, verbatim,
and "left_out" with the reason.

'mcpx tools URL' and 'mcpx tools -- COMMAND [ARGS...]' list a server that is
not configured: through proxyd when it is up (recorded as an ad-hoc
server), in-process otherwise.

Examples:
   mcpx tools
   mcpx tools docs -o json
   mcpx tools https://example.com/mcp
   mcpx tools -- npx -y @modelcontextprotocol/server-everything`,
	Flags:        []cli.Flag{outputFlag},
	BashComplete: completeServers,
	Action:       runTools,
}

func runTools(c *cli.Context) error {
	if _, err := format(c); err != nil {
		return err
	}
	if t, rest := adHocTarget(c, c.Args().Slice()); t != nil {
		if len(rest) > 0 {
			return usageErr("tools takes one URL, or a stdio command after '--'")
		}
		return runToolsAdHoc(c, t)
	}
	if c.NArg() > 1 {
		return usageErr("tools takes at most one SERVER")
	}
	server := c.Args().First()
	tools, err := newClient(c).Tools(c.Context, server)
	if err != nil {
		return daemonErr(err)
	}
	var state api.State
	if server != "" {
		state = serverStates(c)[server]
	}
	err = render(c, tools, func(w io.Writer) error {
		if len(tools) == 0 && state != "" && state != api.StateReady && state != api.StateDegraded {
			// Say why the server has none to show.
			emptyNote(w, fmt.Sprintf("No tools: %s is %s (see 'mcpx status %s').", server, state.Phrase(), server))
			return nil
		}
		return toolsTable(w, tools)
	})
	if err == nil && state == api.StateError {
		// As status SERVER: nothing of it is served (a CI gate).
		return silentExit(ExitUnavailable)
	}
	return err
}

// runToolsAdHoc lists the tools of a one-shot target.
func runToolsAdHoc(c *cli.Context, t *api.AdHocTarget) error {
	res, err := runAdHoc(c, t, "tools/list", nil)
	if err != nil {
		return err
	}
	var tools []api.Tool
	if res.Error == nil {
		var r struct {
			Tools []struct {
				Name        string          `json:"name"`
				Title       string          `json:"title"`
				Description string          `json:"description"`
				InputSchema json.RawMessage `json:"inputSchema"`
				Annotations struct {
					ReadOnly    *bool `json:"readOnlyHint"`
					Destructive *bool `json:"destructiveHint"`
				} `json:"annotations"`
			} `json:"tools"`
		}
		if err := decodeResult(res, &r); err != nil {
			return err
		}
		for _, x := range r.Tools {
			tl := api.Tool{Server: res.Server, Name: x.Name, Exposed: x.Name, Title: x.Title, Description: x.Description, InputSchema: x.InputSchema}
			tl.ReadOnly = x.Annotations.ReadOnly != nil && *x.Annotations.ReadOnly
			tl.Destructive = !tl.ReadOnly && (x.Annotations.Destructive == nil || *x.Annotations.Destructive)
			tools = append(tools, tl)
		}
	}
	if res.Error != nil {
		return rpcOutcome(c, res, nil)
	}
	return render(c, tools, func(w io.Writer) error { return toolsTable(w, tools) })
}

func toolsTable(w io.Writer, tools []api.Tool) error {
	if len(tools) == 0 {
		emptyNote(w, "No tools (are the servers ready? see 'mcpx status').")
		return nil
	}
	t := newTable(w, "TOOL", "SERVER", "KIND", "DESCRIPTION")
	for _, tl := range tools {
		kind := "write"
		switch {
		case tl.ReadOnly:
			kind = "read-only"
		case tl.Destructive:
			kind = "destructive"
		}
		desc := t.Fit(tl.Description, 70, oneLine)
		if tl.LeftOut != "" {
			kind, desc = "left out", t.Fit(tl.LeftOut, 70, oneLine)
		}
		_ = t.Append([]string{tl.Exposed, tl.Server, kind, desc})
	}
	return t.Render()
}
