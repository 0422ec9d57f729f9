package commands

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/proxyd"

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

var healthCommand = &cli.Command{
	Name:      "health",
	Usage:     "each server's health: state and tool-call failure rate over 5 minutes",
	ArgsUsage: "[SERVER]",
	Description: `A ready server whose tool calls mostly fail is degraded: at least 5 calls
in the last 5 minutes and more than half failed. Tool errors (isError),
proxy policy refusals, cancellations and sign-in prompts do not count.
Connection, auth and disabled states take precedence. Exits 9 when a
server shown is not ready (degraded, error, connecting; disabled ones
aside), so it can gate CI.

Examples:
   mcpx health
   mcpx health docs -o json
   mcpx health --replica proxyd-1     # one of several replicas on shared state

With several proxyd replicas on one state database, every live replica's
view is listed (theirs as published on their last heartbeat, at most 5 s
old) with a REPLICA column.

With proxyd not running, the window's calls are counted from the activity
record (each replica's apart; the state is unknown) and health exits 3.`,
	Flags: []cli.Flag{outputFlag,
		&cli.StringSliceFlag{Name: "replica", Usage: "only these proxyd `REPLICA`s"}},
	BashComplete: completeServers,
	Action:       runHealth,
}

func runHealth(c *cli.Context) error {
	if _, err := format(c); err != nil {
		return err
	}
	replicas := api.SplitList(c.StringSlice("replica"))
	out, err := newClient(c).Health(c.Context, c.Args().First(), replicas...)
	offline := false
	if err != nil {
		err = fromRecord(c, err, func(r *proxyd.Record) (err error) {
			out, err = r.Health(c.Context, c.Args().First(), replicas...)
			offline = true
			return err
		})
	}
	if err != nil {
		return err
	}
	err = render(c, out, func(w io.Writer) error {
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
			row := []string{s.Name, string(s.State), fmt.Sprint(h.Calls), fmt.Sprint(h.Failed), dash(h.DominantClass), t.Fit(summary, 70, fitCause)}
			if several {
				row = append([]string{s.Replica}, row...)
			}
			_ = t.Append(row)
		}
		return t.Render()
	})
	if err != nil {
		return err
	}
	// A CI gate: without proxyd nothing is served, whatever the record
	// says; any server shown that is not ready (disabled ones aside)
	// fails it too.
	if offline {
		return silentExit(ExitProxydNotRunning)
	}
	var bad []string
	for _, s := range out {
		if s.State != api.StateReady && s.State != api.StateDisabled {
			bad = append(bad, s.Name+" is "+s.State.Phrase())
		}
	}
	if len(bad) > 0 {
		errorf(c, "unhealthy: %s\n", strings.Join(bad, ", "))
		return silentExit(ExitUnavailable)
	}
	return nil
}
