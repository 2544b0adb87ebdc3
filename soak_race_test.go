//go:build soak && race

package netio_test

func init() { soakRace = true }
