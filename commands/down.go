package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

var downCommand = &cli.Command{
	Name:  "down",
	Usage: "stop proxyd gracefully",
	Description: `Asks proxyd to drain in-flight calls and stop, and waits until its socket
is gone. Not running is success.

Examples:
   mcpx down`,
	Flags: []cli.Flag{
		&cli.DurationFlag{Name: "timeout", Action: positiveTimeout, Value: 20 * time.Second, Usage: "wait up to `DURATION` for proxyd to stop"},
	},
	Action: runDown,
}

func runDown(c *cli.Context) error {
	cl := newClient(c)
	st, err := cl.Status(c.Context)
	if api.IsNotRunning(err) {
		fmt.Fprintln(c.App.Writer, "proxyd is not running")
		return nil
	}
	if err != nil {
		return err
	}
	if err := cl.Shutdown(c.Context); err != nil && !api.IsNotRunning(err) {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := cl.Status(ctx); api.IsNotRunning(err) {
			fmt.Fprintf(c.App.Writer, "proxyd stopped (pid %d)\n", st.PID)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("proxyd (pid %d) did not stop within %s", st.PID, c.Duration("timeout"))
		case <-tick.C:
		}
	}
}
