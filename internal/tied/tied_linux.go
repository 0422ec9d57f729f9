package tied

import (
	"os/exec"
	"runtime"
	"syscall"
)

// Start starts cmd with SIGKILL as its parent-death signal, from an OS
// thread kept for it until exited is closed (the caller closes it once
// cmd.Wait returns). The kernel sends the signal when the thread that
// started the child ends, not the process, and the Go runtime ends a
// thread when a goroutine locked to it returns: a child started from any
// thread could die the moment some goroutine that locked that thread
// returned.
func Start(cmd *exec.Cmd, exited <-chan struct{}) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		err := cmd.Start()
		started <- err
		if err == nil {
			<-exited
		}
	}()
	return <-started
}
