//go:build race

package cacheclient

// raceEnabled: the race detector changes inlining, hence escape analysis (allocation tests).
const raceEnabled = true
