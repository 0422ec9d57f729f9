//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package config

import (
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive advisory lock on the config directory, so
// that two mcpx processes editing the file do not lose each other's change.
func lockDir(dir string) (func(), error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lock config directory: %w", err)
	}
	for {
		err = syscall.Flock(int(d.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("lock config directory: %w", err)
	}
	return func() {
		_ = syscall.Flock(int(d.Fd()), syscall.LOCK_UN)
		d.Close()
	}, nil
}
