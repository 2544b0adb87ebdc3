//go:build race

package netio_test

// raceEnabled: the race detector is on, under which allocation counts say
// little (sync.Pool drops items at random, so pooled objects are made again).
const raceEnabled = true
