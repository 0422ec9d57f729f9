//go:build !linux

package tied

import "os/exec"

// Start starts cmd. Only Linux has a parent-death signal; elsewhere the
// child outlives a killed parent.
func Start(cmd *exec.Cmd, _ <-chan struct{}) error { return cmd.Start() }
