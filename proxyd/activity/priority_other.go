//go:build !linux

package activity

import "sync/atomic"

// goLowered runs f on a goroutine of its own at the usual priority: only
// Linux sets a nice value per thread. thread stays 0.
func goLowered(f func(), thread *atomic.Int64) { go f() }
