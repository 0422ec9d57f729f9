package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/mcpx-dev/mcpx/fixtures/tlsfixtures"
)

func init() {
	register(fixtureCmd{
		name:    "tls",
		summary: "TLS and HTTP failure servers for mcpx probe (bad certificates, non-TLS peers, 404/502, broken OAuth discovery)",
		run:     runTLS,
	})
}

func runTLS(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("tls", "[--kind KIND] [--list]")
	kind := fs.String("kind", tlsfixtures.KindOK, "fixture `KIND` to serve (see --list)")
	list := fs.Bool("list", false, "list the kinds with what a probe should report, and exit")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *list {
		for _, k := range tlsfixtures.Kinds {
			e := tlsfixtures.Expected[k]
			verdict := e.Code
			if e.Reason != "" {
				verdict += "/" + e.Reason
			}
			if _, err := fmt.Fprintf(stdout, "%-28s %-46s %s\n", k, verdict, e.Summary); err != nil {
				return fmt.Errorf("print kinds: %w", err)
			}
		}
		return nil
	}
	exp, ok := tlsfixtures.Expected[*kind]
	if !ok {
		return usageErrorf("tls: unknown --kind %q (one of: %s)", *kind, strings.Join(tlsfixtures.Kinds, ", "))
	}
	f, err := tlsfixtures.Start(*kind)
	if err != nil {
		return fmt.Errorf("start TLS fixture: %w", err)
	}
	defer f.Close()
	verdict := exp.Code
	if exp.Reason != "" {
		verdict += "/" + exp.Reason
	}
	if _, err := fmt.Fprintf(stdout, "url: %s\nca_file: %s\nexpect: %s\n", f.URL, f.CAFile, verdict); err != nil {
		return fmt.Errorf("print ready lines: %w", err)
	}
	<-ctx.Done()
	return nil
}
