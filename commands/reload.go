package commands

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

var reloadCommand = &cli.Command{
	Name:  "reload",
	Usage: "make proxyd re-read its config file",
	Description: `proxyd also watches the config file and reloads on its own; use this after
editing on a file system without change notifications. An invalid file is
reported and the running configuration stays.

Examples:
   mcpx reload`,
	Flags:  []cli.Flag{outputFlag},
	Action: runReload,
}

func runReload(c *cli.Context) error {
	res, err := newClient(c).Reload(c.Context)
	if err != nil {
		return daemonErr(err)
	}
	return render(c, res, func(w io.Writer) error {
		fmt.Fprintf(w, "config reloaded: added [%s], removed [%s], changed [%s]\n",
			strings.Join(res.Added, ", "), strings.Join(res.Removed, ", "), strings.Join(res.Changed, ", "))
		return nil
	})
}
