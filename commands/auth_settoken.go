package commands

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/urfave/cli/v2"
)

var authSetTokenCommand = &cli.Command{
	Name:      "set-token",
	Usage:     "store a static bearer token (PAT, API key) for SERVER, read from stdin",
	ArgsUsage: "SERVER",
	Description: `For a server that takes a static bearer token instead of an OAuth sign-in
(a personal access token, an API key): proxyd keeps it in its token store,
never in the config file, and sends it as "Authorization: Bearer TOKEN".
The token is read from stdin, never from the command line (it would stay
in the shell's history and the process list). 'mcpx logout SERVER'
removes it.

Examples:
   printf %s "$GITHUB_PAT" | mcpx auth set-token github
   mcpx auth set-token github < ~/.config/github-pat`,
	Flags:        []cli.Flag{outputFlag},
	BashComplete: completeServers,
	Action:       runAuthSetToken,
}

func runAuthSetToken(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErr("auth set-token needs one SERVER (the token comes on stdin)")
	}
	if _, err := format(c); err != nil {
		return err
	}
	if f, ok := c.App.Reader.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		return usageErr("pipe the token in: printf %%s \"$TOKEN\" | mcpx auth set-token %s (typing it would show it)", c.Args().First())
	}
	b, err := io.ReadAll(io.LimitReader(c.App.Reader, 1<<20))
	if err != nil {
		return fmt.Errorf("reading the token from stdin: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return usageErr("no token on stdin")
	}
	res, err := newClient(c).SetToken(c.Context, c.Args().First(), tok)
	if err != nil {
		return daemonErr(err)
	}
	return render(c, res, func(w io.Writer) error {
		what := "stored"
		if res.Replaced {
			what = "stored, replacing the grant held before"
		}
		_, err := fmt.Fprintf(w, "token for %s %s; proxyd connects with it now (see 'mcpx status %s')\n", res.Server, what, res.Server)
		return err
	})
}
