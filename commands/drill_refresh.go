package commands

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/urfave/cli/v2"

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

Examples:
   mcpx drill refresh docs --callers 50
   mcpx drill refresh docs -o json | jq .token_requests`,
	Flags: []cli.Flag{
		reportOutputFlag,
		&cli.IntFlag{Name: "callers", Aliases: []string{"n"}, Value: 50, Usage: "concurrent callers `N` (1-1000)"},
	},
	BashComplete: completeServers,
	Action:       runDrillRefresh,
}

func init() { drillCommand.Subcommands = append(drillCommand.Subcommands, drillRefreshCommand) }

func runDrillRefresh(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErr("drill refresh needs one SERVER")
	}
	if _, err := reportFormat(c); err != nil {
		return err
	}
	req := api.RefreshDrillRequest{Server: c.Args().First(), Callers: c.Int("callers")}
	var rep *api.RefreshDrillReport
	var failure *api.ErrorDetail
	err := newClient(c).Stream(c.Context, http.MethodPost, "/v1/drill/refresh", req, func(line []byte) error {
		var ev api.RefreshDrillEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return err
		}
		switch ev.Type {
		case "progress":
			errorf(c, "… %s\n", ev.Message)
		case "report":
			rep = ev.Report
		case "error":
			failure = ev.Error
		}
		return nil
	})
	if err != nil {
		return daemonErr(err)
	}
	if failure != nil {
		return errors.New(failure.Message)
	}
	if rep == nil {
		return errors.New("proxyd ended the drill without a report; see its log")
	}
	if err := renderReport(c, rep, func(w io.Writer) error {
		fmt.Fprintf(w, "refresh drill against %s with %d callers\n", rep.Server, rep.Callers)
		fmt.Fprintf(w, "  token requests: %d (expected 1)\n", rep.TokenRequests)
		fmt.Fprintf(w, "  calls:          %d succeeded, %d failed\n", rep.Succeeded, rep.Failed)
		fmt.Fprintf(w, "  grant intact:   %s\n", yesNo(rep.GrantIntact))
		fmt.Fprintf(w, "  latency:        p50 %.1fms, p99 %.1fms\n", rep.P50MS, rep.P99MS)
		for _, n := range rep.Notes {
			fmt.Fprintf(w, "  note: %s\n", sanitize(n))
		}
		fmt.Fprintf(w, "verdict: %s\n", rep.Verdict)
		return nil
	}, func() report.Run { return refreshDrillRun(rep, serverURL(c, rep.Server)) }); err != nil {
		return err
	}
	if !strings.EqualFold(rep.Verdict, api.VerdictPass) {
		return silentExit(ExitDrillFailed)
	}
	return nil
}
