// Package rttfloor holds only a benchmark: the round-trip floor of netio's
// threading shape without libfabric. Each side's socket I/O is done by a
// reactor (package reactor: one locked OS thread, a lock-free ring and an
// eventfd doorbell); each message is handed to a user goroutine parked in
// Go's netpoller on an eventfd, and the reply goes back through the ring.
// Next to it runs plain net.TCPConn ping-pong, in one process and across
// two, so that the cost of the shape itself can be read off side by side:
//
//	go test -run '^$' -bench . ./internal/rttfloor
//
// BenchmarkInterleaved runs the variants in turns within one run, so that
// their ratios hold while the load of a shared machine swings.
package rttfloor
