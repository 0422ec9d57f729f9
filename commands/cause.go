package commands

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/errtext"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// Error text from upstreams and libraries arrives as a chain of wrapping
// ("failed to connect: transport error: failed to send request: dial tcp:
// lookup x.test: no such host"). People need the end of it: the cause.

// dedupeChain is the chain on one line without its repeated links.
func dedupeChain(s string) string {
	return errtext.Dedupe(strings.Join(strings.Fields(s), " "))
}

// fitCause shortens an error for a table cell of at most max bytes: it
// keeps the end of the chain whole and drops the wrapping in front
// ("…lookup x.test: no such host"); a last link longer than max is cut
// after a whole word. Never mid-word.
func fitCause(s string, max int) string {
	s = dedupeChain(oneLine(s, 1<<20))
	if len(s) <= max {
		return s
	}
	links := strings.Split(s, ": ")
	for i := 1; i < len(links); i++ {
		if tail := strings.Join(links[i:], ": "); len(tail)+len("…") <= max {
			return "…" + tail
		}
	}
	last := links[len(links)-1]
	cut := ""
	for _, w := range strings.Fields(last) {
		next := strings.TrimSpace(cut + " " + w)
		if len(next)+len("…") > max {
			break
		}
		cut = next
	}
	if cut == "" {
		return cutAt(last, max-len("…")) + "…"
	}
	return cut + "…"
}

// tableTime is how tables show a time: local, with the zone offset. JSON
// and YAML carry RFC 3339 in UTC.
func tableTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05 -07:00")
}

// timeoutFlag names what set the deadline of a call that timed out: the
// --timeout flag when given, else the server's configured timeout.
func timeoutFlag(c *cli.Context, e *api.CallError) string {
	if e.ErrorClass != "timeout" {
		return ""
	}
	if c.IsSet("timeout") {
		return fmt.Sprintf(" (after --timeout %s)", c.Duration("timeout"))
	}
	return " (after the server's call timeout: 'timeout' in the config, or pass --timeout)"
}
