package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// LogFile is proxyd's log in the state dir when started by 'mcpx up'.
const LogFile = "proxyd.log"

var upCommand = &cli.Command{
	Name:  "up",
	Usage: "start proxyd in the background and wait until it is ready",
	Description: `Starts proxyd as a background process logging to proxyd.log in the state
dir, and returns once it answers on its socket. Already running is
success. Use 'mcpx down' to stop it.

Examples:
   mcpx up
   mcpx up --timeout 30s
   mcpx --state-dir /tmp/mcpx --socket /tmp/mcpx/s.sock up`,
	Flags: []cli.Flag{
		outputFlag,
		&cli.DurationFlag{Name: "timeout", Action: positiveTimeout, Value: 15 * time.Second, Usage: "wait up to `DURATION` for proxyd to become ready"},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "proxyd's log `LEVEL`: debug, info, warn or error"},
	},
	Action: runUp,
}

func runUp(c *cli.Context) error {
	if _, err := format(c); err != nil {
		return err
	}
	cl := newClient(c)
	if st, err := cl.Status(c.Context); err == nil {
		return render(c, st, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "proxyd already running (pid %d) on %s\n", st.PID, st.Socket)
			return err
		})
	} else if !api.IsNotRunning(err) {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the mcpx binary: %w", err)
	}
	dir := stateDir(c)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating state dir: %w", err)
	}
	logPath := filepath.Join(dir, LogFile)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening %s: %w", logPath, err)
	}
	defer logf.Close()
	// Errors shown are this start's only: the log from here on.
	startOffset, _ := logf.Seek(0, io.SeekEnd)
	args := []string{"--socket", socketPath(c), "--config", configPath(c), "--state-dir", dir,
		"proxyd", "--log-level", c.String("log-level")}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlive this shell
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting proxyd: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := cl.Status(ctx)
		if err == nil {
			return render(c, st, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "proxyd started (pid %d)\n  socket: %s\n  MCP endpoint: %s\n  log: %s\n", st.PID, st.Socket, st.MCPURL, logPath)
				return err
			})
		}
		select {
		case err := <-exited:
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() == ExitConfig {
				return exitErr(ExitConfig, fmt.Errorf("proxyd refused its config; from %s:\n%s", logPath, tail(logPath, startOffset, 4)))
			}
			if errors.As(err, &ee) || err == nil {
				// Another daemon may have won the race for the socket.
				if st, serr := cl.Status(c.Context); serr == nil {
					fmt.Fprintf(c.App.Writer, "proxyd already running (pid %d) on %s\n", st.PID, st.Socket)
					return nil
				}
			}
			return fmt.Errorf("proxyd exited before it was ready; last lines of %s:\n%s", logPath, tail(logPath, startOffset, 8))
		case <-ctx.Done():
			return fmt.Errorf("proxyd did not become ready within %s; see %s", c.Duration("timeout"), logPath)
		case <-tick.C:
		}
	}
}

// tail returns the last n lines of a file written after offset.
func tail(path string, offset int64, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if offset > 0 && offset <= int64(len(b)) {
		b = b[offset:]
	}
	lines := splitLines(string(b))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := ""
	for _, l := range lines {
		out += "  " + l + "\n"
	}
	return out
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
