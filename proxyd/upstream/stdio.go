package upstream

import (
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
)

// stderrTail keeps the last lines a stdio child wrote to stderr, so a
// child that dies during the handshake can be explained.
const stderrTailBytes = 2048

// child remembers the current stdio process of a connection.
type child struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	stderr []byte
}

func (ch *child) set(cmd *exec.Cmd) {
	ch.mu.Lock()
	ch.cmd, ch.stderr = cmd, nil
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

// explain wraps err with how the child ended, once it has (call after
// the transport is closed, which waits for the process and its stderr).
func (ch *child) explain(err error) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.cmd == nil || ch.cmd.ProcessState == nil {
		return err
	}

	// The cause goes last, where people and 'mcpx status' look for it:
	// how the child ended and its last stderr lines (up to 3, 300 bytes).
	lines := strings.Split(strings.TrimSpace(string(ch.stderr)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	tail := strings.TrimSpace(strings.Join(lines, "\n"))
	if len(tail) > 300 {
		tail = tail[len(tail)-300:]
	}
	msg := fmt.Sprintf("stdio server %q %s before answering", ch.cmd.Path, ch.cmd.ProcessState.String())
	if tail != "" {
		msg += "; last stderr: " + tail
	}
	return fmt.Errorf("%w: %s", err, msg)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
