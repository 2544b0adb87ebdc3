//go:build race

package netio_test

// raceEnabled is set when the race detector is on: tests that time things
// skip themselves, the instrumented code being too slow to say anything.
const raceEnabled = true
