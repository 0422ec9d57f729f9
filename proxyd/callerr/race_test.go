//go:build race

package callerr

// raceDetector is whether the tests run under the race detector, whose
// sync.Pool drops some of what is put back.
const raceDetector = true
