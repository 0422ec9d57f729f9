package upstream

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// stderrTail keeps the last lines a stdio child wrote to stderr, so a
// child that dies during the handshake can be explained.
const stderrTailBytes = 2048

// A child's stdout carries MCP messages only; the library skips a line
// that is not one without a word. proxyd keeps the last few (a banner, a
// log line printed to stdout) to name them when the handshake fails.
const (
	strayLines = 3
	strayHead  = 120 // bytes kept of each
)

// childGrace is how long a child has to exit once its stdin closes,
// before its process group gets SIGTERM (and WaitDelay later SIGKILL):
// the MCP library's times for a child it starts itself.
const childGrace = 2 * time.Second

// child remembers the current stdio process of a connection.
type child struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	stderr []byte
	stray  []string // the last lines of stdout that were not JSON-RPC
	// ended: proxyd signalled the child, which had not exited within
	// childGrace of its stdin closing.
	ended bool
	// answered: the handshake succeeded, so nothing will explain it any
	// more: no line of its stdout is kept, and its requests and
	// notifications go to proxyd's handlers (see stdioLink.line).
	answered atomic.Bool
	// breach: its stdout broke a bound and proxyd ended it.
	breach error
}

func (ch *child) set(cmd *exec.Cmd) {
	ch.mu.Lock()
	ch.cmd, ch.stderr, ch.stray, ch.ended, ch.breach = cmd, nil, nil, false, nil
	ch.answered.Store(false)
	ch.mu.Unlock()
}

// tee returns a writer that records stderr and passes it on.
func (ch *child) tee(next io.Writer) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		ch.mu.Lock()
		ch.stderr = append(ch.stderr, p...)
		if over := len(ch.stderr) - stderrTailBytes; over > 0 {
			ch.stderr = ch.stderr[over:]
		}
		ch.mu.Unlock()
		return next.Write(p)
	})
}

// startChild starts s's command and speaks MCP over its stdin and stdout,
// through the library (transport.NewIO) for the handshake and the lists
// and itself for what it relays (stdioLink). proxyd starts the child
// itself, rather than the library, to read its stdout first. conn is the
// connection's number (see losses).
func (c *Conn) startChild(conn uint64, s config.Server) (transport.Interface, error) {
	ctx, stop := context.WithCancel(c.ctx)
	cmd := exec.CommandContext(ctx, s.Command, s.Args...)
	cmd.Env = childEnv(s.Env) // never os.Environ(): the daemon's secrets stay home
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 3 * time.Second
	// A writer, not a file: exec copies stderr, and Wait returns only
	// once the stream is read to its end, so a dying child's last words
	// are in before its cause is written down.
	cmd.Stderr = c.child.tee(c.opts.stderr(c.name))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		stop()
		return nil, fmt.Errorf("starting %s: %w", s.Command, err)
	}
	// stdout is a pipe of proxyd's own, not exec's: Wait closes exec's
	// once the child exits, while the library may still be reading what
	// the child wrote last.
	out, w, err := os.Pipe()
	if err != nil {
		stop()
		return nil, fmt.Errorf("starting %s: %w", s.Command, err)
	}
	cmd.Stdout = w
	c.child.set(cmd)
	if err := cmd.Start(); err != nil {
		stop()
		out.Close()
		w.Close()
		return nil, fmt.Errorf("starting %s: %w", s.Command, err)
	}
	w.Close() // the child's end now
	link, libOut := newStdioLink(c, conn, stdin)
	t := &childTransport{Stdio: transport.NewIO(libOut, link.libraryStdin(), nil), link: link, child: &c.child, cmd: cmd, stdout: out, stop: stop, exited: make(chan struct{})}
	go link.read(out)
	go func() {
		_ = cmd.Wait()
		close(t.exited)
	}()
	return t, nil
}

// childTransport is the library's stdio transport over a child proxyd
// started, which it ends on Close.
type childTransport struct {
	*transport.Stdio
	link     *stdioLink
	child    *child
	cmd      *exec.Cmd
	stdout   *os.File
	stop     context.CancelFunc
	exited   chan struct{}
	once     sync.Once
	closeErr error
}

// Close ends the child as the library ends its own: stdin closed, a
// grace period to exit, then SIGTERM to its process group (SIGKILL
// WaitDelay later). It returns once the child is gone.
func (t *childTransport) Close() error {
	t.once.Do(func() {
		t.closeErr = t.Stdio.Close()
		select {
		case <-t.exited:
		case <-time.After(childGrace):
			t.child.mu.Lock()
			t.child.ended = t.child.cmd == t.cmd // not a newer child's
			t.child.mu.Unlock()
			t.stop()
			<-t.exited
		}
		t.stop() // releases the context of a child that exited by itself
		t.stdout.Close()
		t.link.lib.Close() // the library reads no more
	})
	return t.closeErr
}

// note keeps a line of the child's stdout read before the handshake's
// answer if it cannot be a JSON-RPC message (one starts with '{', or '['
// for a batch): see strayLines.
func (ch *child) note(b []byte) {
	line := bytes.TrimSpace(b[:min(len(b), strayHead)])
	if len(line) == 0 || line[0] == '{' || line[0] == '[' {
		return
	}
	ch.mu.Lock()
	ch.stray = append(ch.stray, redact.Text(string(line)))
	if len(ch.stray) > strayLines {
		ch.stray = ch.stray[1:]
	}
	ch.mu.Unlock()
}

// explain wraps err with what the child did that explains it: how it
// ended, once it has (call after the transport is closed, which waits
// for the process and its stderr), with its last stderr lines, and what
// it wrote to stdout that is not JSON-RPC.
func (ch *child) explain(err error) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.cmd == nil {
		return err
	}
	var parts []string
	if ch.breach != nil {
		parts = append(parts, ch.breach.Error())
	}
	if ch.cmd.ProcessState != nil {
		// The cause goes last, where people and 'mcpx status' look for
		// it: how the child ended and its last stderr lines (up to 3,
		// 300 bytes).
		lines := strings.Split(strings.TrimSpace(string(ch.stderr)), "\n")
		if len(lines) > 3 {
			lines = lines[len(lines)-3:]
		}
		tail := strings.TrimSpace(strings.Join(lines, "\n"))
		if len(tail) > 300 {
			tail = tail[len(tail)-300:]
		}
		msg := fmt.Sprintf("stdio server %q %s before answering", ch.cmd.Path, ch.cmd.ProcessState.String())
		if ch.ended {
			msg = fmt.Sprintf("stdio server %q did not answer, nor exit when its stdin closed, and proxyd ended it (%s)", ch.cmd.Path, ch.cmd.ProcessState.String())
		}
		if tail != "" {
			msg += "; last stderr: " + tail
		}
		parts = append(parts, msg)
	}
	if len(ch.stray) > 0 {
		quoted := make([]string, len(ch.stray))
		for i, l := range ch.stray {
			quoted[i] = fmt.Sprintf("%q", l)
		}
		// No ": " before the lines: a shortened cause keeps its last
		// link, which is then the statement rather than a bare quote.
		parts = append(parts, fmt.Sprintf("stdio server %q wrote lines to stdout that are not JSON-RPC, such as %s (stdout carries MCP messages only; logs belong on stderr)", ch.cmd.Path, strings.Join(quoted, ", ")))
	}
	if len(parts) == 0 {
		return err
	}
	return fmt.Errorf("%w: %s", err, strings.Join(parts, "; "))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
