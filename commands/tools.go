package commands

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"
)

var toolsCommand = &cli.Command{
	Name:      "tools",
	Usage:     "list the tools of every server, or of one",
	ArgsUsage: "[SERVER]",
	Description: `Lists tools as MCP clients see them through proxyd: the exposed name
(the server's prefix, <server>__ by default, and the tool's own name),
whether the tool is read-only or destructive, and its description. A tool
whose name another server already exposes is marked "left out". -o json
includes each tool's input schema, verbatim.

Examples:
   mcpx tools
   mcpx tools docs -o json`,
	Flags:        []cli.Flag{outputFlag},
	BashComplete: completeServers,
	Action:       runTools,
}

func runTools(c *cli.Context) error {
	if c.NArg() > 1 {
		return usageErr("tools takes at most one SERVER")
	}
	if _, err := format(c); err != nil {
		return err
	}
	tools, err := newClient(c).Tools(c.Context, c.Args().First())
	if err != nil {
		return daemonErr(err)
	}
	return render(c, tools, func(w io.Writer) error {
		if len(tools) == 0 {
			fmt.Fprintln(w, "No tools (are the servers ready? see 'mcpx status').")
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
			desc := oneLine(tl.Description, 70)
			if tl.LeftOut != "" {
				kind, desc = "left out", oneLine(tl.LeftOut, 70)
			}
			_ = t.Append([]string{tl.Exposed, tl.Server, kind, desc})
		}
		return t.Render()
	})
}
