package commands

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/redact"
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
		outputFlag,
		&cli.IntFlag{Name: "callers", Aliases: []string{"n"}, Value: 50, Usage: "concurrent callers `N` (1-1000)"},
	},
	BashComplete: completeServers,
	Action:       runDrillRefresh,
}

func runDrillRefresh(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErr("drill refresh needs one SERVER")
	}
	if _, err := format(c); err != nil {
		return err
	}
	req := api.RefreshDrillRequest{Server: c.Args().First(), Callers: c.Int("callers")}
	return runDrill(c, func() (*api.Stream[api.RefreshDrillEvent], error) { return newClient(c).RefreshDrill(c.Context, req) },
		printRefreshReport)
}

func printRefreshReport(w io.Writer, rep *api.RefreshDrillReport) error {
	fmt.Fprintf(w, "refresh drill against %s with %d callers\n", rep.Server, rep.Callers)
	fmt.Fprintf(w, "  token requests: %d (expected 1)\n", rep.TokenRequests)
	fmt.Fprintf(w, "  calls:          %d succeeded, %d failed\n", rep.Succeeded, rep.Failed)
	fmt.Fprintf(w, "  grant intact:   %s\n", yesNo(rep.GrantIntact))
	fmt.Fprintf(w, "  latency:        p50 %.1fms, p99 %.1fms\n", rep.P50MS, rep.P99MS)
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "  note: %s\n", redact.Control(n))
	}
	fmt.Fprintf(w, "verdict: %s\n", rep.Verdict)
	return nil
}
