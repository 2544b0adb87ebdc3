//go:build !race

package netio_test

const raceEnabled = false
