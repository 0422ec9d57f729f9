package commands

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/proxyd"
	"github.com/mcpx-dev/mcpx/proxyd/replica"
)

var proxydCommand = &cli.Command{
	Name:  "proxyd",
	Usage: "run the proxyd daemon in the foreground",
	Description: `Runs proxyd until SIGINT or SIGTERM, logging to stderr. Use it under
systemd, launchd, a container or a test; 'mcpx up' runs it in the
background instead. On a signal it drains in-flight calls, closes the
upstreams, flushes state and removes the socket.

Its garbage collector runs at GOGC=400 with GOMEMLIMIT=1GiB (fewer
collections on the request path); set either variable to override.

Examples:
   mcpx proxyd
   mcpx proxyd --log-level debug --socket /tmp/mcpx.sock`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json"},
		&cli.StringFlag{Name: "replica", EnvVars: []string{replica.EnvID}, Usage: "this proxyd's `ID` among replicas sharing one state database (default: the host name)"},
	},
	Action: runProxyd,
}

func runProxyd(c *cli.Context) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return usageErr("--log-level: %v", err)
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(c.App.ErrWriter, hopts)
	if c.String("log-format") == "json" {
		h = slog.NewJSONHandler(c.App.ErrWriter, hopts)
	}
	tuneCollector()
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := proxyd.Run(ctx, proxyd.Options{
		Socket:     socketPath(c),
		ConfigPath: configPath(c),
		StateDir:   stateDir(c),
		Version:    Version,
		Logger:     slog.New(h),
		Replica:    c.String("replica"),
	})
	var running *proxyd.AlreadyRunningError
	if errors.As(err, &running) {
		return exitErr(ExitFailure, err)
	}
	if err != nil {
		return fmt.Errorf("proxyd: %w", err)
	}
	return nil
}

// The daemon's collector settings where the environment sets none.
// proxyd's live heap is a few megabytes, so Go's default (GOGC=100)
// collects after every few megabytes of per-call garbage, taking CPU from
// the calls in flight; at 400 it collects a quarter as often, for some
// tens of megabytes more under load. The memory limit keeps a large live
// heap from being multiplied by five; it is set well above anything proxyd
// holds, since near it the collector runs almost without pause.
const (
	daemonGCPercent   = 400
	daemonMemoryLimit = 1 << 30
)

func tuneCollector() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(daemonGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(daemonMemoryLimit)
	}
}
