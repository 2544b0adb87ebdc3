package netio

import "strings"

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
// With 1 MiB pages the slice is one page posted at a time: slower for a
// lone stream in one process, faster between two processes, and uncapped
// it made LowLatency round trips under a stream several times slower
// (docs/decisions/2026-11-23-slice-one-page.md).

// sliceBytes is how many bytes of data sends a link keeps posted at most on
// a provider that copies in software, unless a single send is larger.
const sliceBytes = 256 << 10

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
// software-copy provider, when nothing is in flight or it fits in the
// slice with what is.
func (l *link) mayPost(n int) bool {
	return !l.sliced() || l.txInFlight == 0 || l.txInFlight+n <= sliceBytes
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
