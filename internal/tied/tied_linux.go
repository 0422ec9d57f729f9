package tied

import (
	"os/exec"
	"runtime"
	"syscall"
)

// Start starts cmd with SIGKILL as its parent-death signal and waits for
// it; the channel is closed once cmd has exited (the caller does not call
// cmd.Wait). The start and the wait run on an OS thread kept for the
// child: the kernel sends the signal when the thread that started the
// child ends, not the process, and the Go runtime ends a thread when a
// goroutine locked to it returns, so a child started from any thread
// could die the moment some goroutine that locked that thread returned.
func Start(cmd *exec.Cmd) (<-chan struct{}, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		err := cmd.Start()
		started <- err
		if err == nil {
			_ = cmd.Wait()
			close(exited)
		}
	}()
	return exited, <-started
}
