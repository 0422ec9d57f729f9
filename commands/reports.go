package commands

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/report"
)

// reportOutputFlag is -o for commands that also write CI reports.
var reportOutputFlag = &cli.StringFlag{
	Name:    "output",
	Aliases: []string{"o"},
	Usage:   "output `FORMAT`: table, json, yaml, sarif (SARIF 2.1.0) or junit (JUnit XML)",
	Value:   "table",
}

// reportFormat returns the validated -o value of a command that writes
// CI reports.
func reportFormat(c *cli.Context) (string, error) {
	switch f := strings.ToLower(c.String("output")); f {
	case "sarif", "junit":
		return f, nil
	}
	f, err := format(c)
	if err != nil {
		return "", usageErr("unknown output format %q: use table, json, yaml, sarif or junit", c.String("output"))
	}
	return f, nil
}

// renderReport prints v like render does, or as SARIF or JUnit built from
// the run; in a GitHub Actions job every finding also becomes an
// annotation (on stderr, so stdout stays the chosen format).
func renderReport(c *cli.Context, v any, table func(w io.Writer) error, run func() report.Run) error {
	f, err := reportFormat(c)
	if err != nil {
		return err
	}
	var r report.Run
	if f == "sarif" || f == "junit" || report.InGitHubActions() {
		r = run()
		r.Version = Version
	}
	if report.InGitHubActions() {
		if err := report.WriteGitHubAnnotations(c.App.ErrWriter, r); err != nil {
			return fmt.Errorf("writing annotations: %w", err)
		}
	}
	switch f {
	case "sarif":
		return report.WriteSARIF(c.App.Writer, r)
	case "junit":
		return report.WriteJUnit(c.App.Writer, r)
	}
	return render(c, v, table)
}
