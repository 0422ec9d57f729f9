package commands

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/internal/report"
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
		reportOutputFlag,
		&cli.IntFlag{Name: "callers", Aliases: []string{"n"}, Value: 50, Usage: "concurrent callers `N` per replica (1-1000)"},
		&cli.StringSliceFlag{Name: "replicas", Usage: "control `SOCKET`s of the other replicas to fire callers from at the same moment"},
	},
	BashComplete: completeServers,
	Action:       runDrillRefresh,
}

func runDrillRefresh(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErr("drill refresh needs one SERVER")
	}
	if _, err := reportFormat(c); err != nil {
		return err
	}
	if n := c.Int("callers"); n < 1 || n > 1000 {
		return usageErr("--callers must be between 1 and 1000")
	}
	req := api.RefreshDrillRequest{Server: c.Args().First(), Callers: c.Int("callers")}
	if others := api.SplitList(c.StringSlice("replicas")); len(others) > 0 {
		return refreshDrillReplicas(c, req, others)
	}
	return runDrill(c, func() (*api.Stream[api.RefreshDrillEvent], error) { return newClient(c).RefreshDrill(c.Context, req) },
		printRefreshReport, func(r *api.RefreshDrillReport) report.Run {
			return refreshDrillRun(r, serverURL(c, r.Server), serverSource(c, r.Server))
		})
}

func printRefreshReport(w io.Writer, rep *api.RefreshDrillReport) error {
	fmt.Fprintf(w, "refresh drill against %s with %d callers\n", rep.Server, rep.Callers)
	fmt.Fprintf(w, "  token requests: %d (expected 1)\n", rep.TokenRequests)
	fmt.Fprintf(w, "  calls:          %d succeeded, %d failed\n", rep.Succeeded, rep.Failed)
	fmt.Fprintf(w, "  grant intact:   %s\n", yesNo(rep.GrantIntact))
	fmt.Fprintf(w, "  latency:        p50 %.1fms, p99 %.1fms\n", rep.P50MS, rep.P99MS)
	for _, p := range rep.Replicas {
		fmt.Fprintf(w, "  replica %s: %d token request(s), %d/%d calls succeeded\n", redact.Control(p.Replica), p.TokenRequests, p.Succeeded, p.Callers)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "  note: %s\n", redact.Control(n))
	}
	fmt.Fprintf(w, "verdict: %s\n", rep.Verdict)
	return nil
}

// refreshDrillReplicas runs the drill on the --socket replica and every
// other one at once, and sums their reports: one token request across
// all of them is the pass.
func refreshDrillReplicas(c *cli.Context, req api.RefreshDrillRequest, others []string) error {
	req.At = time.Now().Add(750 * time.Millisecond).UTC()
	clients := []*api.Client{newClient(c)}
	where := []string{socketPath(c)}
	for _, sock := range others {
		clients = append(clients, api.NewClient(sock, Version))
		where = append(where, sock)
	}
	reps := make([]*api.RefreshDrillReport, len(clients))
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, cl := range clients {
		r := req
		r.Join = i > 0
		wg.Go(func() { reps[i], errs[i] = refreshDrillPart(c, cl, r, i == 0) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("replica at %s: %w", where[i], err)
		}
	}
	sum := &api.RefreshDrillReport{DrillOutcome: api.DrillOutcome{Server: req.Server}, GrantIntact: reps[0].GrantIntact}
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
	if err := renderReport(c, sum, func(w io.Writer) error { return printRefreshReport(w, sum) },
		func() report.Run { return refreshDrillRun(sum, serverURL(c, sum.Server), serverSource(c, sum.Server)) }); err != nil {
		return err
	}
	if sum.Verdict == api.VerdictFail {
		return silentExit(ExitDrillFailed)
	}
	return nil
}

// refreshDrillPart runs one replica's part of the drill, printing its
// progress when asked.
func refreshDrillPart(c *cli.Context, cl *api.Client, req api.RefreshDrillRequest, progress bool) (*api.RefreshDrillReport, error) {
	st, err := cl.RefreshDrill(c.Context, req)
	if err != nil {
		return nil, daemonErr(err)
	}
	defer st.Close()
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("proxyd ended the drill without a report; see its log")
		}
		if err != nil {
			return nil, err
		}
		switch ev.Type {
		case api.DrillEventProgress:
			if progress {
				errorf(c, "%s  %s\n", ev.Time.Local().Format("15:04:05.000"), redact.Control(ev.Message))
			}
		case api.DrillEventError:
			if ev.Error != nil {
				return nil, errors.New("drill: " + redact.Control(ev.Error.Message))
			}
			return nil, errors.New("drill failed")
		case api.DrillEventReport:
			return ev.Report, nil
		}
	}
}
