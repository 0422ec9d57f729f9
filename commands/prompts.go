package commands

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/editdistance"
	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

var promptsCommand = &cli.Command{
	Name:      "prompts",
	Usage:     "list the prompts of every server, or of one",
	ArgsUsage: "[SERVER]",
	Description: `Lists prompts as MCP clients see them through proxyd (the exposed name),
with their arguments (* marks a required one). Get one with 'mcpx prompt'.
A prompt whose name another server already exposes, or of a server that
is not ready, is marked "left out" with the reason: clients do not see
it (-o json: "left_out").

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
			desc := t.Fit(p.Description, 60, oneLine)
			if p.LeftOut != "" {
				desc = "left out: " + t.Fit(p.LeftOut, 60, oneLine)
			}
			_ = t.Append([]string{p.Exposed, p.Server, dash(strings.Join(args, " ")), desc})
		}
		return t.Render()
	})
}

var promptCommand = &cli.Command{
	Name:      "prompt",
	Usage:     "get a prompt of SERVER with its arguments, through proxyd",
	ArgsUsage: "SERVER NAME [KEY=VALUE ...] | EXPOSED [KEY=VALUE ...]",
	Description: `Gets prompt NAME (the server's own name or the exposed one) from SERVER,
or the prompt an exposed name alone names, with KEY=VALUE arguments
(prompt arguments are strings), recorded in the activity log, and prints
its messages. Exits 8 when there is no such prompt (with the nearest
name), 2 when an argument the prompt requires is missing; a key the
prompt does not take is sent with a warning.

Examples:
   mcpx prompt everything simple-prompt
   mcpx prompt everything__simple-prompt
   mcpx prompt everything complex-prompt temperature=0.7 style=terse`,
	Flags: []cli.Flag{
		outputFlag, saveFlag,
		&cli.DurationFlag{Name: "timeout", Action: positiveTimeout, Usage: "give up after `DURATION`", DefaultText: "the server's call timeout"},
	},
	BashComplete: completeServers,
	Action:       runPrompt,
}

func runPrompt(c *cli.Context) error {
	if c.NArg() < 1 {
		return usageErr("prompt needs SERVER and NAME, or the exposed name alone")
	}
	if _, err := format(c); err != nil {
		return err
	}
	// SERVER NAME when the first word is a server, else the exposed name
	// alone (as 'mcpx prompts' lists it) with its arguments.
	servers := serverStates(c)
	server, name, rest := c.Args().Get(0), c.Args().Get(1), c.Args().Slice()[min(2, c.NArg()):]
	if _, isServer := servers[server]; c.NArg() == 1 || (!isServer && strings.Contains(name, "=")) {
		server, name, rest = "", server, c.Args().Slice()[1:]
	}
	args := map[string]string{}
	for _, kv := range rest {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usageErr("argument %q is not KEY=VALUE", kv)
		}
		if _, dup := args[k]; dup {
			return usageErr("argument %q is given twice", k)
		}
		args[k] = v
	}
	prompts, err := newClient(c).Prompts(c.Context, server)
	if err != nil {
		return daemonErr(err)
	}
	p, err := findPrompt(prompts, server, name)
	if _, isServer := servers[name]; err != nil && server == "" && isServer {
		return usageErr("prompt needs NAME after SERVER %s (see 'mcpx prompts %s')", name, name)
	}
	if err != nil && server != "" && strings.Contains(name, "=") {
		return usageErr("prompt needs NAME after SERVER %s, before %s (see 'mcpx prompts %s')", server, name, server)
	}
	if st := servers[server]; err != nil && server != "" && st != api.StateReady && st != api.StateDegraded {
		// Its prompts are not known now: the server says (or its state).
		p, err = nil, nil
	}
	if err != nil {
		return err
	}
	if p != nil {
		server, name = p.Server, p.Name
		if err := checkPromptArguments(c, p, args); err != nil {
			return err
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

// findPrompt finds name (the server's own or the exposed one) among the
// listed prompts; without a server, only an exposed name. A prompt not
// listed is an error naming the nearest one, unless the server lists
// none at all (nil: the request goes, and the server answers).
func findPrompt(prompts []api.Prompt, server, name string) (*api.Prompt, error) {
	var names []string
	for i, p := range prompts {
		if p.Exposed == name || (server != "" && p.Name == name) {
			return &prompts[i], nil
		}
		names = append(names, p.Exposed)
		if server != "" {
			names = append(names, p.Name)
		}
	}
	if server != "" && len(prompts) == 0 {
		return nil, nil
	}
	where := "no server exposes a prompt"
	see := "mcpx prompts"
	if server != "" {
		where = fmt.Sprintf("server %q has no prompt", server)
		see += " " + server
	}
	return nil, exitErr(ExitNotFound, fmt.Errorf("%s named %q%s (see '%s')", where, name, editdistance.DidYouMean(name, names), see))
}

// checkPromptArguments refuses a prompt's request without an argument it
// requires, and names on stderr a key it does not take (sent as given).
func checkPromptArguments(c *cli.Context, p *api.Prompt, args map[string]string) error {
	var missing, known []string
	for _, a := range p.Arguments {
		known = append(known, a.Name)
		if _, ok := args[a.Name]; a.Required && !ok {
			missing = append(missing, a.Name)
		}
	}
	if len(missing) > 0 {
		return usageErr("prompt %s needs %s=VALUE (its arguments: %s; see 'mcpx prompts %s')", p.Exposed, strings.Join(missing, "=VALUE "), strings.Join(known, ", "), p.Server)
	}
	warnUnknownKeys(c, "prompt "+p.Exposed, slices.Sorted(maps.Keys(args)), known)
	return nil
}

// serverStates are the servers proxyd has and their states (none when it
// cannot tell: the request then says why).
func serverStates(c *cli.Context) map[string]api.State {
	out := map[string]api.State{}
	if st, err := newClient(c).Status(c.Context); err == nil {
		for _, s := range st.Servers {
			out[s.Name] = s.State
		}
	}
	return out
}
