package commands

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

var promptsCommand = &cli.Command{
	Name:      "prompts",
	Usage:     "list the prompts of every server, or of one",
	ArgsUsage: "[SERVER]",
	Description: `Lists prompts as MCP clients see them through proxyd (the exposed name),
with their arguments (* marks a required one). Get one with 'mcpx prompt'.

Examples:
   mcpx prompts
   mcpx prompts docs -o json`,
	Flags:        []cli.Flag{outputFlag},
	BashComplete: completeServers,
	Action:       runPrompts,
}

func runPrompts(c *cli.Context) error {
	if c.NArg() > 1 {
		return usageErr("prompts takes at most one SERVER")
	}
	if _, err := format(c); err != nil {
		return err
	}
	out, err := newClient(c).Prompts(c.Context, c.Args().First())
	if err != nil {
		return daemonErr(err)
	}
	return render(c, out, func(w io.Writer) error {
		if len(out) == 0 {
			emptyNote(w, "No prompts (does the server offer any? see 'mcpx status').")
			return nil
		}
		t := newTable(w, "PROMPT", "SERVER", "ARGUMENTS", "DESCRIPTION")
		for _, p := range out {
			var args []string
			for _, a := range p.Arguments {
				if a.Required {
					args = append(args, a.Name+"*")
				} else {
					args = append(args, a.Name)
				}
			}
			_ = t.Append([]string{p.Exposed, p.Server, dash(strings.Join(args, " ")), t.Fit(p.Description, 60, oneLine)})
		}
		return t.Render()
	})
}

var promptCommand = &cli.Command{
	Name:      "prompt",
	Usage:     "get a prompt of SERVER with its arguments, through proxyd",
	ArgsUsage: "SERVER NAME [KEY=VALUE ...]",
	Description: `Gets prompt NAME (the server's own name or the exposed one) from SERVER
with KEY=VALUE arguments (prompt arguments are strings), recorded in the
activity log, and prints its messages. Exits 8 when there is no such
prompt.

Examples:
   mcpx prompt everything simple-prompt
   mcpx prompt everything complex-prompt temperature=0.7 style=terse`,
	Flags: []cli.Flag{
		outputFlag, saveFlag,
		&cli.DurationFlag{Name: "timeout", Action: positiveTimeout, Usage: "give up after `DURATION`", DefaultText: "the server's call timeout"},
	},
	BashComplete: completeServers,
	Action:       runPrompt,
}

func runPrompt(c *cli.Context) error {
	if c.NArg() < 2 {
		return usageErr("prompt needs SERVER and NAME")
	}
	if _, err := format(c); err != nil {
		return err
	}
	server, name := c.Args().Get(0), c.Args().Get(1)
	args := map[string]string{}
	for _, kv := range c.Args().Slice()[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usageErr("argument %q is not KEY=VALUE", kv)
		}
		if _, dup := args[k]; dup {
			return usageErr("argument %q is given twice", k)
		}
		args[k] = v
	}
	// The exposed name works too: find the server's own name.
	if prompts, err := newClient(c).Prompts(c.Context, server); err == nil {
		for _, p := range prompts {
			if p.Exposed == name && p.Name != name {
				name = p.Name
			}
		}
	}
	params, _ := jsonObject(map[string]any{"name": name, "arguments": args})
	res, err := sendRPC(c, api.RPCRequest{Server: server, Method: "prompts/get", Params: params})
	if err != nil {
		return err
	}
	return rpcOutcome(c, res, func(w io.Writer) error {
		var r struct {
			Description string `json:"description"`
			Messages    []struct {
				Role    string  `json:"role"`
				Content content `json:"content"`
			} `json:"messages"`
		}
		if err := decodeResult(res, &r); err != nil {
			return err
		}
		if r.Description != "" {
			fmt.Fprintln(w, "# "+oneLine(r.Description, 200))
		}
		p := &contentPrinter{w: w, save: c.String("save")}
		for _, m := range r.Messages {
			fmt.Fprintf(w, "%s:\n", strings.ToUpper(redact.Control(m.Role)))
			if err := p.print(m.Content); err != nil {
				return err
			}
		}
		return nil
	})
}

// jsonObject marshals params of a request.
func jsonObject(v map[string]any) (json.RawMessage, error) { return json.Marshal(v) }
