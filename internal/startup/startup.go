// Package startup keeps the garbage collector out of process start.
//
// Package initialisation allocates a few megabytes (mcp-go's server pulls
// in a JSON Schema library that compiles its meta-schemas at init), enough
// for one collection before main runs: a few milliseconds of every short
// command such as "mcpx status". Go initialises packages in import-path
// order as soon as their imports are initialised, and this package
// imports only runtime/debug, so its init runs before the heavy ones
// (e2e's TestCollectorOffBeforeHeavyInits checks that). main calls Done
// first thing to give the collector back its setting.
package startup

import "runtime/debug"

// gcPercent is the setting in force before init (GOGC, or 100).
var gcPercent = debug.SetGCPercent(-1)

// Done restores the collector's setting. Safe to call more than once.
func Done() {
	debug.SetGCPercent(gcPercent)
}
