package netio_test

import (
	"os"
	"testing"
)

// Counting only a benchmark's timed loop with perf, whose instructions per
// message other load on a shared machine hardly moves (ns/op it moves by
// 15% and more; docs/benchmarks.md):
//
//	mkfifo ctl ack
//	PERF_CTL_FIFO=ctl PERF_ACK_FIFO=ack perf stat -D -1 --control fifo:ctl,ack \
//	    -e instructions:u,instructions:k,cycles ./netio.test -test.run '^$' \
//	    -test.bench 'BenchmarkStream/^4KiB/netio$' -test.benchtime 30000x
//
// The loops that call perfOn and perfOff are the only ones counted; without
// the variables they do nothing.

// perfOn starts perf's counters, perfOff stops them.
func perfOn(b testing.TB)  { perfControl(b, "enable") }
func perfOff(b testing.TB) { perfControl(b, "disable") }

// perfControl sends cmd on perf's control fifo and waits for its ack, so
// that the counters are on (or off) before the loop goes on.
func perfControl(b testing.TB, cmd string) {
	ctl, ack := os.Getenv("PERF_CTL_FIFO"), os.Getenv("PERF_ACK_FIFO")
	if ctl == "" || ack == "" {
		return
	}
	if err := os.WriteFile(ctl, []byte(cmd+"\n"), 0); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(ack)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Read(make([]byte, 8)); err != nil {
		b.Fatal(err)
	}
}
