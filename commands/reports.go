package commands

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/report"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// commandStarted is when this mcpx process began: the command's start
// for the reports (one command per process).
var commandStarted = time.Now()

// reportOutputFlag is -o for commands that also write CI reports.
var reportOutputFlag = &cli.StringFlag{
	Name:    "output",
	Aliases: []string{"o"},
	Usage:   "output `FORMAT`: table, tsv, json, yaml, sarif (SARIF 2.1.0) or junit (JUnit XML)",
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
		return "", usageErr("unknown output format %q: use table, tsv, json, yaml, sarif or junit", c.String("output"))
	}
	return f, nil
}

// renderReport prints v like render does, or as SARIF or JUnit built from
// the run; in a GitHub Actions job every finding also becomes an
// annotation. GitHub documents workflow commands on stdout, where they go
// under a table; when stdout carries a report (json, yaml, sarif, junit)
// they go to stderr instead, which the runner reads for workflow commands
// too, so that the report stays valid.
func renderReport(c *cli.Context, v any, table func(w io.Writer) error, run func() report.Run) error {
	f, err := reportFormat(c)
	if err != nil {
		return err
	}
	var r report.Run
	if f == "sarif" || f == "junit" || report.InGitHubActions() {
		r = run()
		r.Version = Version
		r.Root, _ = os.Getwd()
		r.Started = commandStarted
		r.Host, _ = os.Hostname()
	}
	switch f {
	case "sarif":
		err = report.WriteSARIF(c.App.Writer, r)
	case "junit":
		err = report.WriteJUnit(c.App.Writer, r)
	default:
		// A report is read by people, in a terminal or a CI log: its
		// tables stay aligned unless -o tsv asks otherwise.
		err = renderTables(c, v, table, strings.EqualFold(c.String("output"), "tsv"))
	}
	if err != nil || !report.InGitHubActions() {
		return err
	}
	w := c.App.Writer
	if f != "table" {
		w = c.App.ErrWriter
	}
	if err := report.WriteGitHubAnnotations(w, r); err != nil {
		return fmt.Errorf("writing annotations: %w", err)
	}
	return nil
}

// serverSource is the line of the config file that declares the server
// name; nil when the file cannot be read or does not list it.
func serverSource(c *cli.Context, name string) *report.Source {
	path := configPath(c)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	for _, e := range config.ListEntries(b, "servers") {
		if e.Name == name {
			return report.SourceOf(path, b, e.Line, e.Column)
		}
	}
	return nil
}
