package commands

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/internal/report"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// drillCommand groups the drills, one subcommand (and file) each; all run
// through runDrill.
var drillCommand = &cli.Command{
	Name:  "drill",
	Usage: "fire controlled failures at an upstream and report how it and proxyd cope",
	Description: `Drills run inside proxyd against a configured server: they provoke a
failure real deployments meet (a forgotten session, tokens expiring under
load), show progress while they run and end with a verdict. A failing
verdict exits 5, so a drill can gate CI. -o sarif and -o junit write the
verdict's checks as CI reports (and annotations in GitHub Actions).`,
	Subcommands: []*cli.Command{drillSessionCommand, drillRefreshCommand},
}

// runDrill runs a drill through proxyd the same way for every drill:
// progress lines on stderr as the stream brings them, then the report in
// the chosen format (table by table, SARIF and JUnit by ci), and a FAIL
// verdict as exit code 5.
func runDrill[R any, P interface {
	*R
	Outcome() *api.DrillOutcome
}](c *cli.Context, open func() (*api.Stream[api.DrillEvent[R]], error), table func(w io.Writer, r *R) error, ci func(r *R) report.Run) error {
	st, err := open()
	if err != nil {
		return daemonErr(err)
	}
	defer st.Close()
	var rep *R
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch ev.Type {
		case api.DrillEventProgress:
			errorf(c, "%s  %s\n", ev.Time.Local().Format("15:04:05.000"), redact.Control(ev.Message))
		case api.DrillEventError:
			// The drill could not run: not a pass.
			if ev.Error != nil {
				return exitErr(ExitUnavailable, errors.New("drill cannot run: "+redact.Control(ev.Error.Message)))
			}
			return exitErr(ExitUnavailable, errors.New("drill cannot run"))
		case api.DrillEventReport:
			rep = ev.Report
		}
	}
	if rep == nil {
		return errors.New("proxyd ended the drill without a report; see its log")
	}
	if err := renderReport(c, rep, func(w io.Writer) error { return table(w, rep) }, func() report.Run { return ci(rep) }); err != nil {
		return err
	}
	if P(rep).Outcome().Verdict == api.VerdictFail {
		return silentExit(ExitDrillFailed)
	}
	return nil
}

var drillSessionCommand = &cli.Command{
	Name:      "session",
	Usage:     "end SERVER's upstream session and check that proxyd re-establishes it once",
	ArgsUsage: "SERVER",
	Description: `Replays a forgotten session: proxyd ends its session with SERVER (HTTP DELETE
when the server accepts it, else by presenting a session id the server does
not know), fires N concurrent calls at read-only tools (and, with
--include-writes, at a tool that is not read-only) and reports:

   reinits        session re-initialisations (expected 1 for all N calls)
   retried        calls sent again on the new session (reads only)
   not_repeated   calls that reached the server on the lost session and
                  were not sent again because repeating them is not safe
   failed         calls that failed otherwise

The verdict is PASS when there was exactly one re-initialisation, no read
failed and a call on the new session works; FAIL exits 5. Servers without
sessions (the modern protocol era, stdio, SSE) are reported as not
applicable, exit 0. Writes really run on the server: use --include-writes
only where that is harmless.

Examples:
   mcpx drill session fixture --calls 20
   mcpx drill session fixture --calls 50 --include-writes -o json`,
	Flags: []cli.Flag{
		reportOutputFlag,
		&cli.IntFlag{Name: "calls", Aliases: []string{"n"}, Value: 20, Usage: "concurrent calls `N` after the session ends (1-1000)"},
		&cli.BoolFlag{Name: "include-writes", Usage: "also call a tool that is not read-only (it must not be repeated)"},
	},
	BashComplete: completeServers,
	Action:       runDrillSession,
}

func runDrillSession(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErr("drill session needs exactly one SERVER (see 'mcpx drill session --help')")
	}
	if _, err := reportFormat(c); err != nil {
		return err
	}
	n := c.Int("calls")
	if n < 1 || n > 1000 {
		return usageErr("--calls must be between 1 and 1000")
	}
	req := api.SessionDrillRequest{Server: c.Args().First(), Calls: n, IncludeWrites: c.Bool("include-writes")}
	return runDrill(c, func() (*api.Stream[api.SessionDrillEvent], error) { return newClient(c).SessionDrill(c.Context, req) },
		func(w io.Writer, r *api.SessionDrillReport) error { return printSessionReport(c, w, r) },
		func(r *api.SessionDrillReport) report.Run {
			return sessionDrillRun(r, serverURL(c, r.Server), serverSource(c, r.Server))
		})
}

func printSessionReport(c *cli.Context, w io.Writer, r *api.SessionDrillReport) error {
	on := colorEnabled(c)
	row := func(k, v string) { fmt.Fprintf(w, "%-14s %s\n", k+":", v) }
	row("server", redact.Control(r.Server))
	if !r.Applicable {
		row("applicable", "no")
		for _, n := range r.Notes {
			row("note", redact.Control(n))
		}
		row("verdict", color(on, dim, string(r.Verdict)))
		return nil
	}
	ended := "HTTP DELETE"
	if r.EndedBy != "delete" {
		ended = "unknown session id presented (server refused DELETE)"
	}
	row("session ended", ended)
	row("calls", fmt.Sprintf("%d (%d reads, %d writes) on %s", r.Calls, r.Reads, r.Writes, redact.Control(strings.Join(r.Tools, ", "))))
	row("reinits", fmt.Sprintf("%d (expected 1)", r.Reinits))
	row("retried", strconv.Itoa(r.Retried))
	row("not repeated", strconv.Itoa(r.NotRepeated))
	row("succeeded", strconv.Itoa(r.Succeeded))
	row("failed", fmt.Sprintf("%d (%d reads)", r.Failed, r.ReadsFailed))
	row("slowest call", fmt.Sprintf("%.1f ms", r.SlowestMS))
	row("after", map[bool]string{true: "a call on the new session works", false: "a call on the new session FAILED"}[r.AfterOK])
	for _, f := range r.Failures {
		row("failure", fmt.Sprintf("%s: %s (%s)", redact.Control(f.Tool), redact.Control(f.Message), f.ErrorClass))
	}
	for _, n := range r.Notes {
		row("note", redact.Control(n))
	}
	v := color(on, green, string(r.Verdict))
	if r.Verdict == api.VerdictFail {
		v = color(on, red, string(r.Verdict))
	}
	row("verdict", v)
	return nil
}
