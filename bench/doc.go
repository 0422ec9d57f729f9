// Package bench holds mcpx's performance benchmarks ('make bench'): each
// measures mcpx against a baseline taken in the same run and reports the
// ratio, never a wall-clock bound.
package bench
