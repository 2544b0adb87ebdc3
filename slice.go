package netio

import (
	"strings"
	"time"
)

// On providers that copy data in software (libfabric's tcp and sockets),
// the reactor thread itself moves every byte: a send is written to the
// socket inside fi_send and inside the fi_cq_read calls that progress it,
// and the tcp provider goes on writing queued sends until the socket is
// full. A link that posts its whole window of 1 MiB pages at once therefore
// makes one progress call move several MiB, during which no other link of
// the process is served. The reactor keeps such calls short by keeping
// at most sliceBytes of a bulk link's data sends in the provider (at least
// one send), and polls latency-sensitive links between bulk links' turns,
// and between a bulk link's progress (its completion queue read) and its
// next post, which on tcp writes to the socket at once: a small message
// waits for one of them at most.
//
// On hardware providers (verbs) the NIC moves the data and a post costs the
// same whatever its size: nothing is held back there.
//
// The slice is there for latency-sensitive traffic, and costs bulk traffic
// when there is none: with pages as large as the slice (1 MiB by default)
// it leaves one send posted, so every page takes a poll round of its own,
// with its completion and its reader's wake-up, where the provider would
// otherwise move several per round. So while no LowLatency link of the
// process has done anything for quietFor, a bulk link may keep
// quietSends sends posted whatever their size: a small message that
// arrives then waits for two pages at most, and from then on the slice
// holds again. BenchmarkBuffered/1MiB/netio-ht in one process, 5 runs
// alternated on a loaded 2-core machine, 2026-11-23: one send posted 1059
// MB/s median (943-1412), two 1447 (1185-1587), no cap 1507 (1421-1792);
// the cap held in BenchmarkMixed's loaded phase (no cap there: LowLatency
// round trips 5-35x idle instead of 2-7x).

// sliceBytes is how many bytes of data sends a link keeps posted at most on
// a provider that copies in software, unless a single send is larger.
const sliceBytes = 256 << 10

// quietSends is how many data sends a bulk link on a software-copy
// provider may keep posted, whatever their size, while latency-sensitive
// links are quiet.
const quietSends = 2

// quietFor is how long the process's LowLatency links must have done
// nothing for bulk links to post beyond the slice: a few loaded round
// trips (150-450 µs cross-process under BenchmarkMixed), so that a
// conversation going on keeps the slice.
const quietFor = time.Millisecond

// copiesInSoftware reports whether provider moves data on the calling
// thread: a socket provider, possibly under a utility layer ("tcp;ofi_rxm").
func copiesInSoftware(provider string) bool {
	for _, p := range strings.Split(provider, ";") {
		switch p {
		case "tcp", "sockets", "net", "udp":
			return true
		}
	}
	return false
}

// mayPost reports whether a data send of n bytes may be posted now: on a
// software-copy provider, when nothing is in flight, when it fits in the
// slice with what is, or when fewer than quietSends are in flight and the
// latency-sensitive links are quiet.
func (l *link) mayPost(n int) bool {
	if !l.sliced() || l.txInFlight == 0 || l.txInFlight+n <= sliceBytes {
		return true
	}
	return l.txPosted-l.tx.done.Load() < quietSends && l.eng.urgentQuiet(time.Now())
}

// urgentQuiet reports whether no latency-sensitive link has done anything
// for quietFor by now.
func (e *engine) urgentQuiet(now time.Time) bool {
	return now.Sub(e.urgentAt) >= quietFor
}

// urgent is the link as the engine schedules it: LowLatency links first.
func (l *link) urgent() bool { return l.cfg.mode == LowLatency }

// sliced reports whether l's work is cut into slices: bulk on a provider
// that copies in software.
func (l *link) sliced() bool { return l.sizes.softCopy && !l.urgent() }

// postDeferred posts what a poll of a sliced link left for later, and
// reports whether there was any.
func (l *link) postDeferred() bool {
	if !l.postLater {
		return false
	}
	l.postLater = false
	l.service()
	return true
}

// postWritten posts the buffers the owner published since the last post,
// without waiting for the task its kick queued. An atomic load when there
// are none.
func (l *link) postWritten() bool {
	if l.txPosted >= l.tx.head.Load() || len(l.ctlOut) > 0 {
		return false
	}
	posted := l.txPosted
	l.service()
	return l.txPosted != posted
}
