//go:build !race

package callerr

const raceDetector = false
