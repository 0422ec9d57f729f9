package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/proxyd"
)

var proxydCommand = &cli.Command{
	Name:  "proxyd",
	Usage: "run the proxyd daemon in the foreground",
	Description: `Runs proxyd until SIGINT or SIGTERM, logging to stderr. Use it under
systemd, launchd, a container or a test; 'mcpx up' runs it in the
background instead. On a signal it drains in-flight calls, closes the
upstreams, flushes state and removes the socket.

Examples:
   mcpx proxyd
   mcpx proxyd --log-level debug --socket /tmp/mcpx.sock`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json"},
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
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := proxyd.Run(ctx, proxyd.Options{
		Socket:     socketPath(c),
		ConfigPath: configPath(c),
		StateDir:   stateDir(c),
		Version:    Version,
		Logger:     slog.New(h),
	})
	var running *proxyd.AlreadyRunningError
	if errors.As(err, &running) {
		return exitErr(ExitFailure, err)
	}
	if err != nil {
		return fmt.Errorf("proxyd: %w", err)
	}
	_ = context.Canceled
	return nil
}
