package commands

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/proxyd"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// fromRecord runs read against proxyd's state database, opened read-only,
// when err says proxyd is not running (the record is what an operator
// wants after a crash), and says so on stderr. Any other err is returned
// as it is; a record that cannot be opened keeps the not-running error
// and adds why.
func fromRecord(c *cli.Context, err error, read func(r *proxyd.Record) error) error {
	if !api.IsNotRunning(err) {
		return daemonErr(err)
	}
	r, oerr := proxyd.OpenRecord(c.Context, configPath(c), stateDir(c))
	if oerr != nil {
		return exitErr(ExitProxydNotRunning, fmt.Errorf("%w; its record cannot be read either: %v", err, oerr))
	}
	defer r.Close()
	errorf(c, "proxyd is not running: reading its record from %s (read-only)\n", r.Where())
	return read(r)
}
