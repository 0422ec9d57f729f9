package commands

import (
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

var healthCommand = &cli.Command{
	Name:      "health",
	Usage:     "each server's health: state and tool-call failure rate over 5 minutes",
	ArgsUsage: "[SERVER]",
	Description: `A ready server whose tool calls mostly fail is degraded: at least 5 calls
in the last 5 minutes and more than half failed. Tool errors (isError),
proxy policy refusals, cancellations and sign-in prompts do not count.
Connection, auth and disabled states take precedence.

Examples:
   mcpx health
   mcpx health docs -o json
   mcpx health --replica proxyd-1     # one of several replicas on shared state

With several proxyd replicas on one state database, every live replica's
view is listed (theirs as published on their last heartbeat, at most 5 s
old) with a REPLICA column.`,
	Flags: []cli.Flag{outputFlag,
		&cli.StringSliceFlag{Name: "replica", Usage: "only these proxyd `REPLICA`s"}},
	BashComplete: completeServers,
	Action:       runHealth,
}

func runHealth(c *cli.Context) error {
	if _, err := format(c); err != nil {
		return err
	}
	q := url.Values{}
	if s := c.Args().First(); s != "" {
		q.Set("server", s)
	}
	for _, r := range api.SplitList(c.StringSlice("replica")) {
		q.Add("replica", r)
	}
	p := "/v1/health"
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out []api.ServerStatus
	if err := newClient(c).Do(c.Context, http.MethodGet, p, nil, &out); err != nil {
		return daemonErr(err)
	}
	return render(c, out, func(w io.Writer) error {
		replicas := map[string]bool{}
		for _, s := range out {
			replicas[s.Replica] = true
		}
		several := len(replicas) > 1
		head := []string{"SERVER", "STATE", "CALLS (5M)", "FAILED", "DOMINANT CLASS", "SUMMARY"}
		if several {
			head = append([]string{"REPLICA"}, head...)
		}
		t := newTable(w, head...)
		for _, s := range out {
			h := s.Health
			if h == nil {
				h = &api.Health{}
			}
			summary := h.Summary
			if s.State != api.StateReady && s.State != api.StateDegraded && s.LastError != "" {
				summary = s.LastError
			}
			row := []string{s.Name, s.State, fmt.Sprint(h.Calls), fmt.Sprint(h.Failed), dash(h.DominantClass), oneLine(summary, 70)}
			if several {
				row = append([]string{s.Replica}, row...)
			}
			_ = t.Append(row)
		}
		return t.Render()
	})
}
