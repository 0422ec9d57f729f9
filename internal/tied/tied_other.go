//go:build !linux

package tied

import "os/exec"

// Start starts cmd and waits for it; the channel is closed once cmd has
// exited. Only Linux has a parent-death signal; elsewhere the child
// outlives a killed parent.
func Start(cmd *exec.Cmd) (<-chan struct{}, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	return exited, nil
}
