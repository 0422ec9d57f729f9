// Package commands is the mcpx command line: one file per top-level
// command, each exporting its *cli.Command, with the shared flags, the
// proxyd client constructor and the output helpers here.
package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/mattn/go-isatty"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// Version is set at build time (-ldflags "-X .../commands.Version=...").
var Version = "dev"

// Global flags: accepted before or after the command.
var globalFlags = []cli.Flag{
	&cli.StringFlag{Name: "socket", Usage: "proxyd's control socket `PATH`", EnvVars: []string{api.EnvSocket}},
	&cli.StringFlag{Name: "config", Usage: "config file `PATH` (default $XDG_CONFIG_HOME/mcpx/config.yaml)", EnvVars: []string{api.EnvConfig}},
	&cli.StringFlag{Name: "state-dir", Usage: "state `DIR` (default $XDG_STATE_HOME/mcpx)", EnvVars: []string{api.EnvStateDir}},
	&cli.BoolFlag{Name: "no-color", Usage: "never colour output (also NO_COLOR=1)"},
}

// outputFlag is -o table|tsv|json|yaml.
var outputFlag = &cli.StringFlag{
	Name:        "output",
	Aliases:     []string{"o"},
	Usage:       "output `FORMAT`: table (aligned), tsv, json or yaml",
	Value:       "table",
	DefaultText: "table on a terminal, tsv otherwise",
}

// stateDir resolves --state-dir.
func stateDir(c *cli.Context) string {
	if d := c.String("state-dir"); d != "" {
		return d
	}
	return api.DefaultStateDir()
}

// socketPath resolves --socket.
func socketPath(c *cli.Context) string {
	if s := c.String("socket"); s != "" {
		return s
	}
	return api.DefaultSocket(stateDir(c))
}

// configPath resolves --config, made absolute: proxyd keeps it, and the
// commands compare it with the file a running proxyd reads.
func configPath(c *cli.Context) string {
	if p := c.String("config"); p != "" {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
		return p
	}
	return config.DefaultPath()
}

// newClient returns a client for proxyd's socket.
func newClient(c *cli.Context) *api.Client {
	cl := api.NewClient(socketPath(c), Version)
	cl.OnVersionSkew = func(daemon string) {
		errorf(c, "warning: proxyd is version %s, this mcpx is %s; restart it with 'mcpx down && mcpx up'\n", daemon, Version)
	}
	return cl
}

// exitErr attaches an exit code to an error.
func exitErr(code int, err error) error {
	if err == nil {
		return nil
	}
	return &codedError{code: code, err: err}
}

type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }
func (e *codedError) ExitCode() int { return e.code }

// silentExit ends the command with a code and no further message (the
// command already printed its verdict).
func silentExit(code int) error { return &codedError{code: code, err: errSilent} }

var errSilent = errors.New("")

// IsSilent reports whether err was already reported to the user.
func IsSilent(err error) bool { return errors.Is(err, errSilent) }

// daemonErr explains a failure to reach proxyd.
func daemonErr(err error) error {
	if api.IsNotRunning(err) {
		return exitErr(ExitProxydNotRunning, err)
	}
	return err
}

// format returns the validated -o value.
func format(c *cli.Context) (string, error) {
	f := strings.ToLower(c.String("output"))
	switch f {
	case "", "table", "tsv":
		return "table", nil // the human form; tableStyle says how its tables look
	case "json", "yaml":
		return f, nil
	}
	return "", exitErr(ExitUsage, fmt.Errorf("unknown output format %q: use table, tsv, json or yaml", c.String("output")))
}

// tsvOutput says whether tables come out as tab-separated values: asked
// for with -o tsv, or the default off a terminal (a pipe, a file, CI),
// where whole cells split on tabs serve a program better than columns
// padded for the eye. -o table keeps them aligned anywhere.
func tsvOutput(c *cli.Context) bool {
	switch strings.ToLower(c.String("output")) {
	case "tsv":
		return true
	case "table":
		if c.IsSet("output") {
			return false
		}
	}
	return !isTTY(c.App.Writer)
}

// tsvWriter marks the writer a table callback gets when its tables are
// to be TSV (see newTable); notes is where words for people go then.
type tsvWriter struct {
	io.Writer
	notes io.Writer
}

// emptyNote says a list is empty ("No tools ..."): on the output for a
// person at a terminal, on stderr when the output is TSV for a program,
// which then reads no rows rather than a sentence.
func emptyNote(w io.Writer, msg string) {
	if tw, ok := w.(tsvWriter); ok {
		w = tw.notes
	}
	fmt.Fprintln(w, msg)
}

// render prints v as JSON or YAML (the API's own structs, so all formats
// carry the same fields), or calls table for the human form, its tables
// TSV where tsvOutput says so.
func render(c *cli.Context, v any, table func(w io.Writer) error) error {
	return renderTables(c, v, table, tsvOutput(c))
}

func renderTables(c *cli.Context, v any, table func(w io.Writer) error, tsv bool) error {
	f, err := format(c)
	if err != nil {
		return err
	}
	w := c.App.Writer
	switch f {
	case "json":
		b, err := machineJSON(v)
		if err != nil {
			return err
		}
		var out bytes.Buffer
		if err := json.Indent(&out, b, "", "  "); err != nil {
			return err
		}
		out.WriteByte('\n')
		_, err = w.Write(out.Bytes())
		return err
	case "yaml":
		b, err := toYAML(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	if tsv {
		w = tsvWriter{w, c.App.ErrWriter}
	}
	return table(w)
}

// toYAML converts through JSON so YAML keys match the JSON field names.
func toYAML(v any) ([]byte, error) {
	j, err := machineJSON(v)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(j)
}

// newTable returns a borderless table with an upper-case header, the
// kubectl style that reads in a terminal; written to a tsvWriter, the
// same header and rows as tab-separated values, cells whole.
func newTable(w io.Writer, headers ...string) *table {
	tb := &table{w: w}
	if _, ok := w.(tsvWriter); ok {
		tb.tsv = true
		tb.rows = [][]string{tsvRow(headers)}
		return tb
	}
	t := tablewriter.NewTable(&tb.buf,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Borders: tw.BorderNone,
			Symbols: tw.NewSymbols(tw.StyleNone),
			Settings: tw.Settings{
				Separators: tw.Separators{BetweenRows: tw.Off, BetweenColumns: tw.Off},
				Lines:      tw.Lines{ShowHeaderLine: tw.Off},
			},
		})),
		tablewriter.WithConfig(tablewriter.Config{
			Header: tw.CellConfig{
				Formatting: tw.CellFormatting{AutoFormat: tw.Off},
				Alignment:  tw.CellAlignment{Global: tw.AlignLeft},
				Padding:    tw.CellPadding{Global: tw.Padding{Left: "", Right: "   "}},
			},
			Row: tw.CellConfig{
				Formatting: tw.CellFormatting{AutoWrap: tw.WrapNone},
				Alignment:  tw.CellAlignment{Global: tw.AlignLeft},
				Padding:    tw.CellPadding{Global: tw.Padding{Left: "", Right: "   "}},
			},
		}),
	)
	hs := make([]any, len(headers))
	for i, h := range headers {
		hs[i] = h
	}
	t.Header(hs...)
	tb.t = t
	return tb
}

// table renders through a buffer so cell padding never leaves trailing
// blanks on a line (they upset diffs, golden files and copy-paste).
type table struct {
	t   *tablewriter.Table
	buf bytes.Buffer
	w   io.Writer
	// rowColors colour whole rendered rows (never cells: tablewriter would
	// count the escape codes as width).
	rowColors []string
	// tsv: rows are kept and written as tab-separated values, uncoloured.
	tsv  bool
	rows [][]string
}

// tsvRow makes cells fit TSV: a tab or a line break inside a cell would
// split it, so each becomes a space.
func tsvRow(cells []string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = strings.Map(func(r rune) rune {
			if r == '\t' || r == '\n' || r == '\r' {
				return ' '
			}
			return r
		}, c)
	}
	return out
}

// Fit shortens s for a cell to at most max bytes with cut (oneLine, or
// fitCause for an error chain) on a terminal; a TSV cell is never cut,
// only made one line.
func (t *table) Fit(s string, max int, cut func(string, int) string) string {
	if t.tsv {
		max = len(s) + 1
	}
	return cut(s, max)
}

// ColorRows sets an ANSI colour code per appended row ("" for none).
func (t *table) ColorRows(codes []string) { t.rowColors = codes }

// shownRow is row with each cell shown safely.
func shownRow(row []string) []string {
	cells := make([]string, len(row))
	for i, c := range row {
		cells[i] = shown(c)
	}
	return cells
}

// Append adds a row, its cells shown safely.
func (t *table) Append(row []string) error {
	cells := shownRow(row)
	if t.tsv {
		t.rows = append(t.rows, tsvRow(cells))
		return nil
	}
	return t.t.Append(cells)
}

// shown makes text that came from a server or a client safe for a
// terminal: every human output strips control characters this one way
// (JSON output escapes them instead).
func shown(s string) string { return redact.Control(s) }

// Render writes the table.
func (t *table) Render() error {
	if t.tsv {
		for _, r := range t.rows {
			if _, err := io.WriteString(t.w, strings.Join(r, "\t")+"\n"); err != nil {
				return err
			}
		}
		return nil
	}
	if err := t.t.Render(); err != nil {
		return err
	}
	for i, line := range strings.SplitAfter(t.buf.String(), "\n") {
		trimmed := strings.TrimRight(line, " \n")
		if line == "" {
			continue
		}
		if row := i - 1; row >= 0 && row < len(t.rowColors) && t.rowColors[row] != "" {
			trimmed = color(true, t.rowColors[row], trimmed)
		}
		if _, err := io.WriteString(t.w, trimmed+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// colorEnabled: only on a terminal, never with NO_COLOR, TERM=dumb or
// --no-color.
func colorEnabled(c *cli.Context) bool {
	if c.Bool("no-color") || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	f, ok := c.App.Writer.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

// color wraps s in an ANSI colour when enabled.
func color(on bool, code, s string) string {
	if !on {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// Colour codes.
const (
	red    = "31"
	green  = "32"
	yellow = "33"
	cyan   = "36"
	dim    = "2"
)

// errorf prints to stderr.
func errorf(c *cli.Context, format string, a ...any) {
	fmt.Fprintf(c.App.ErrWriter, format, a...)
}

// usageErr is a usage error.
func usageErr(format string, a ...any) error {
	return exitErr(ExitUsage, fmt.Errorf(format, a...))
}

// prettyJSON indents raw JSON for humans.
func prettyJSON(raw []byte) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// positiveTimeout refuses a --timeout of zero or less, which would give
// up at once (or, read as "none", wait for ever).
func positiveTimeout(_ *cli.Context, d time.Duration) error {
	if d <= 0 {
		return usageErr("--timeout %s: give a duration above zero (e.g. 10s, 2m), or leave the flag out for the default", d)
	}
	return nil
}

// nonNegativeLimit refuses a negative --limit (0 already means all).
func nonNegativeLimit(_ *cli.Context, n int) error {
	if n < 0 {
		return usageErr("--limit %d: give a count of 0 or more (0: all)", n)
	}
	return nil
}

// replicaOf is the id of the proxyd cl talks to among replicas sharing a
// record ("" when it does not answer): its live activity stream carries
// that replica's calls only, so reads of the record that join the stream
// take the same.
func replicaOf(ctx context.Context, cl *api.Client) string {
	if st, err := cl.Status(ctx); err == nil {
		return st.Replica
	}
	return ""
}

// sleepCtx waits d (nothing when d <= 0) or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// awaitProxyd polls status until a proxyd answers that is not stopping
// (the old one answers status while it drains, until its socket goes),
// ctx ends (its error), or deadline passes (zero: never; then why proxyd
// was not back at the last poll). Polls start 50 ms apart and back off
// to one a second.
func awaitProxyd(ctx context.Context, status func(context.Context) (*api.Status, error), deadline time.Time) error {
	delay := 50 * time.Millisecond
	for {
		st, err := status(ctx)
		if err == nil && !st.Stopping {
			return nil
		}
		if err == nil {
			err = errProxydStopping
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return err
		}
		if err := sleepCtx(ctx, delay); err != nil {
			return err
		}
		delay = min(2*delay, time.Second)
	}
}
