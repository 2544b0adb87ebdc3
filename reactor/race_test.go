//go:build race

package reactor

func init() { raceEnabled = true }
