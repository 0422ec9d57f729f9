package tied

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/internal/waitfor"
)

// helperEnv makes the test binary the parent under test: it starts a
// child ("tied": with Start; "plain": with exec.Cmd.Start), prints the
// child's pid and waits to be killed.
const helperEnv = "MCPX_TIED_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		cmd := exec.Command("sleep", "600")
		wait := func() { _ = cmd.Wait() }
		var err error
		if mode == "tied" {
			var exited <-chan struct{}
			exited, err = Start(cmd)
			wait = func() { <-exited }
		} else {
			err = cmd.Start()
		}
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(cmd.Process.Pid)
		wait() // killed before the child ends
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A child started with Start dies when its parent is killed, cleanups
// and all skipped; one started plainly outlives it (the control: the
// test can tell the two apart).
func TestChildDiesWithKilledParent(t *testing.T) {
	for _, mode := range []string{"tied", "plain"} {
		t.Run(mode, func(t *testing.T) {
			child := orphan(t, mode)
			if mode == "plain" {
				if !alive(child) {
					t.Fatalf("plain child %d died with its parent", child)
				}
				return
			}
			waitfor.Cond(t, 10*time.Second, fmt.Sprintf("child %d to die with its parent", child), func() (bool, string) {
				return !alive(child), "still running"
			})
		})
	}
}

// orphan runs the test binary as a parent that starts a child the mode's
// way, kills that parent with SIGKILL and returns the child's pid.
func orphan(t *testing.T, mode string) int {
	t.Helper()
	parent := exec.Command(os.Args[0], "-test.run", "^$")
	parent.Env = append(os.Environ(), helperEnv+"="+mode)
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the child's pid: %v", err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the parent said %q, not a pid", line)
	}
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	if !alive(child) {
		t.Fatalf("child %d is not running before its parent is killed", child)
	}
	_ = parent.Process.Kill()
	_ = parent.Wait()
	return child
}

// alive reports whether pid is a running process (not gone, not a
// zombie waiting for its reaper). store.ProcessAlive does the same for
// proxyd, which internal packages do not import.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name's closing parenthesis.
	for i := len(b) - 1; i > 0; i-- {
		if b[i] == ')' && i+2 < len(b) {
			return b[i+2] != 'Z'
		}
	}
	return true
}
