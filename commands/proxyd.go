package commands

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/metrics"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/procs"
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

Its garbage collector runs after about 48 MiB of garbage (few collections
on the request path): a memory limit 48 MiB above the live heap, and
GOGC=1000 for a heap under about 4 MiB live; set GOGC or GOMEMLIMIT to
override. Its Go code runs on one processor while it relays one call at
a time (a lone call then pays no thread wake-ups between its
goroutines), and on the runtime's choice once calls overlap, back to one
after a second without overlapping calls. On Linux the activity writer
runs at a lower priority with a processor of its own while calls
overlap; while they come one at a time it writes its batches on their
processor, a few records at a time between requests, so the count does
not change for it. Set GOMAXPROCS to fix the count.
The metrics show the count (go_sched_gomaxprocs_threads) and its changes
(mcpx_processor_changes_total).

Examples:
   mcpx proxyd
   mcpx proxyd --log-level debug --socket /tmp/mcpx.sock`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "log `LEVEL`: debug, info, warn or error"},
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "log `FORMAT`: text or json"},
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
	defer procs.Follow()()
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
// collects after every few megabytes of per-call garbage, and a call
// that meets a collection is ten to thirty times as likely as another to
// be among the slowest 1% (README, "Performance"). So the daemon collects
// after about daemonHeadroom of garbage: a memory limit follows the live
// heap, daemonHeadroom above it, which also keeps a large live heap
// (thousands of upstream tools, a thousand client sessions) from being
// multiplied; GOGC=1000 only bounds a heap under about 4 MiB live, and,
// unlike GOGC=off, keeps the runtime's two-minute collection for an idle
// daemon. The headroom is always there, so the collector never runs
// without pause.
const (
	daemonGCPercent = 1000
	daemonHeadroom  = 48 << 20
	headroomEvery   = 250 * time.Millisecond
)

func tuneCollector() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(daemonGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		go keepHeadroom()
	}
}

// keepHeadroom sets the memory limit to the live heap plus daemonHeadroom,
// again and again as the live heap changes.
func keepHeadroom() {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	for {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			debug.SetMemoryLimit(int64(sample[0].Value.Uint64()) + daemonHeadroom)
		}
		time.Sleep(headroomEvery)
	}
}
