package commands

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

var drillRefreshCommand = &cli.Command{
	Name:      "refresh",
	Usage:     "simulate concurrent token refresh at expiry against SERVER's authorization server",
	ArgsUsage: "SERVER",
	Description: `Marks SERVER's stored access token expired (keeping the refresh token),
fires N concurrent upstream requests plus one proactive refresh, and
reports how many token requests went out (exactly 1 is right: an
authorization server that rotates refresh tokens revokes the whole grant
when one is used twice), how many calls succeeded, whether the grant
still works afterwards, and the calls' latency. PASS or FAIL (exit 5).

Against a real authorization server this performs real refreshes.

With --replicas, the drill runs on several proxyd replicas sharing one
state database at once: the replica of --socket expires the token, then
every replica fires N callers at the same moment, and the token requests
are counted across all of them (still exactly 1 per expiry).

Examples:
   mcpx drill refresh docs --callers 50
   mcpx drill refresh docs -o json | jq .token_requests
   mcpx --socket /run/mcpx/a.sock drill refresh docs --replicas /run/mcpx/b.sock,/run/mcpx/c.sock`,
	Flags: []cli.Flag{
		outputFlag,
		&cli.IntFlag{Name: "callers", Aliases: []string{"n"}, Value: 50, Usage: "concurrent callers `N` per replica (1-1000)"},
		&cli.StringSliceFlag{Name: "replicas", Usage: "control `SOCKET`s of the other replicas to fire callers from at the same moment"},
	},
	BashComplete: completeServers,
	Action:       runDrillRefresh,
}

func init() { drillCommand.Subcommands = append(drillCommand.Subcommands, drillRefreshCommand) }

func runDrillRefresh(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErr("drill refresh needs one SERVER")
	}
	f, err := format(c)
	if err != nil {
		return err
	}
	req := api.RefreshDrillRequest{Server: c.Args().First(), Callers: c.Int("callers")}
	others := api.SplitList(c.StringSlice("replicas"))
	var rep *api.RefreshDrillReport
	if len(others) == 0 {
		if rep, err = streamRefreshDrill(c, newClient(c), req, true); err != nil {
			return err
		}
	} else if rep, err = refreshDrillReplicas(c, req, others); err != nil {
		return err
	}
	if err := render(c, rep, func(w io.Writer) error {
		fmt.Fprintf(w, "refresh drill against %s with %d callers\n", rep.Server, rep.Callers)
		fmt.Fprintf(w, "  token requests: %d (expected 1)\n", rep.TokenRequests)
		fmt.Fprintf(w, "  calls:          %d succeeded, %d failed\n", rep.Succeeded, rep.Failed)
		fmt.Fprintf(w, "  grant intact:   %s\n", yesNo(rep.GrantIntact))
		fmt.Fprintf(w, "  latency:        p50 %.1fms, p99 %.1fms\n", rep.P50MS, rep.P99MS)
		for _, p := range rep.Replicas {
			fmt.Fprintf(w, "  replica %s: %d token request(s), %d/%d calls succeeded\n", sanitize(p.Replica), p.TokenRequests, p.Succeeded, p.Callers)
		}
		for _, n := range rep.Notes {
			fmt.Fprintf(w, "  note: %s\n", sanitize(n))
		}
		fmt.Fprintf(w, "verdict: %s\n", rep.Verdict)
		return nil
	}); err != nil {
		return err
	}
	_ = f
	if !strings.EqualFold(rep.Verdict, api.VerdictPass) {
		return silentExit(ExitDrillFailed)
	}
	return nil
}

// streamRefreshDrill runs one drill request on cl, printing its progress
// when asked, and returns the report.
func streamRefreshDrill(c *cli.Context, cl *api.Client, req api.RefreshDrillRequest, progress bool) (*api.RefreshDrillReport, error) {
	var rep *api.RefreshDrillReport
	var failure *api.ErrorDetail
	err := cl.Stream(c.Context, http.MethodPost, "/v1/drill/refresh", req, func(line []byte) error {
		var ev api.RefreshDrillEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return err
		}
		switch ev.Type {
		case "progress":
			if progress {
				errorf(c, "… %s\n", ev.Message)
			}
		case "report":
			rep = ev.Report
		case "error":
			failure = ev.Error
		}
		return nil
	})
	if err != nil {
		return nil, daemonErr(err)
	}
	if failure != nil {
		return nil, errors.New(failure.Message)
	}
	if rep == nil {
		return nil, errors.New("proxyd ended the drill without a report; see its log")
	}
	return rep, nil
}

// refreshDrillReplicas runs the drill on the --socket replica and every
// other one at once, and sums their reports: one token request across
// all of them is the pass.
func refreshDrillReplicas(c *cli.Context, req api.RefreshDrillRequest, others []string) (*api.RefreshDrillReport, error) {
	req.At = time.Now().Add(750 * time.Millisecond).UTC()
	clients := []*api.Client{newClient(c)}
	for _, sock := range others {
		clients = append(clients, api.NewClient(sock, Version))
	}
	reps := make([]*api.RefreshDrillReport, len(clients))
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, cl := range clients {
		r := req
		r.Join = i > 0
		wg.Go(func() { reps[i], errs[i] = streamRefreshDrill(c, cl, r, i == 0) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			where := socketPath(c)
			if i > 0 {
				where = others[i-1]
			}
			return nil, fmt.Errorf("replica at %s: %w", where, err)
		}
	}
	sum := &api.RefreshDrillReport{Server: req.Server, Notes: []string{}, GrantIntact: reps[0].GrantIntact}
	for _, r := range reps {
		sum.Callers += r.Callers
		sum.TokenRequests += r.TokenRequests
		sum.Succeeded += r.Succeeded
		sum.Failed += r.Failed
		sum.P50MS = max(sum.P50MS, r.P50MS)
		sum.P99MS = max(sum.P99MS, r.P99MS)
		sum.Notes = append(sum.Notes, r.Notes...)
		sum.Replicas = append(sum.Replicas, *r)
	}
	sum.Verdict = api.VerdictFail
	switch {
	case sum.TokenRequests == 1 && sum.Failed == 0 && sum.GrantIntact:
		sum.Verdict = api.VerdictPass
	case sum.TokenRequests > 1:
		sum.Notes = append(sum.Notes, fmt.Sprintf("%d token requests across replicas for one expiry: the replicas raced (an authorization server with reuse detection revokes the grant)", sum.TokenRequests))
	}
	return sum, nil
}
