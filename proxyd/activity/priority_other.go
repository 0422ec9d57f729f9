//go:build !linux

package activity

// lowerWriterPriority leaves the writer's priority as it is: only Linux
// sets a nice value per thread.
func lowerWriterPriority() {}
