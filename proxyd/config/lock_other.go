//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package config

// lockDir is a no-op where flock is unavailable; edits within one process
// are still serialised.
func lockDir(string) (func(), error) { return func() {}, nil }
