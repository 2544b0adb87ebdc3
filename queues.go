package netio

import (
	"sync"
	"sync/atomic"

	"github.com/netio-go/netio/internal/doorbell"
	"github.com/netio-go/netio/internal/ring"
	"github.com/netio-go/netio/internal/wire"
)

// The two hand-offs between a connection's user side and the reactor. They
// are the only state both sides touch: everything in them is fixed once
// connected, an atomic, or a ring with one producer and one consumer.

// sendQueue is the send buffers between the writing side and the reactor.
// The writer fills buffers in order and publishes them by advancing head;
// the reactor posts what credit allows and advances done as sends
// complete. Buffer i is free for the writer once head-done < slots.
type sendQueue struct {
	mem     []byte   // the registered send region, slots buffers of bufSize
	bufSize int      // bytes per buffer, header included
	slots   int      // buffers
	lens    []uint32 // bytes to send per buffer: written before head moves past it
	// tails are, per buffer, nil or the last bytes of its lens that lie in
	// the writer's memory instead of the buffer (send_from_slice.go); written with lens.
	tails   [][]byte
	lent    []atomic.Uint32 // per buffer, who has its tail: lentNone, lentWaiting, ...
	head    atomic.Uint64
	done    atomic.Uint64
	waiting atomic.Bool // a writer waits for a buffer: the reactor wakes it
	wake    *doorbell.Bell
}

// buf is the send buffer of sequence number seq.
func (q *sendQueue) buf(seq uint64) []byte {
	slot := int(seq % uint64(q.slots))
	return q.mem[slot*q.bufSize : (slot+1)*q.bufSize]
}

// full reports whether every buffer is in flight once head is published.
func (q *sendQueue) full(head uint64) bool { return head-q.done.Load() >= uint64(q.slots) }

// free is how many buffers the writer may fill without waiting.
func (q *sendQueue) free() int { return q.slots - int(q.head.Load()-q.done.Load()) }

// recvQueue is the receive buffers between the reactor and the reading
// side. The reactor hands over checked buffers in order through ready;
// the reader, and Message.Release from any goroutine, hand them back
// through free, and the reactor posts them again.
type recvQueue struct {
	mem     []byte // the registered receive region
	bufSize int
	ready   *ring.SPSC // reactor to reader
	free    *ring.SPSC // back to the reactor; producers serialised by freeMu
	freeMu  sync.Mutex
	refs    []atomic.Int32 // per buffer: words of lent Messages not all back (lending, message.go)
	lending lending        // which Messages are out, to catch a second Release
	kickAt  int            // free buffers that make it worth waking the reactor
	urgent  atomic.Bool    // the peer is out of credit: hand buffers back at once
	held    atomic.Bool    // Messages may outlive the connection (zero-copy reads)
	waiting atomic.Bool    // a reader waits: the reactor wakes it
	// fin is the peer's FIN received, set after the buffers that came
	// before it are in ready: once they are read, the stream has ended,
	// though the link may still be open for sending (the peer's
	// CloseWrite).
	fin  atomic.Bool
	wake *doorbell.Bell
}

// payload is the data of buffer slot, as its header describes it.
func (q *recvQueue) payload(slot uint32) ([]byte, wire.Header) {
	off := int(slot) * q.bufSize
	h := wire.ReadHeader(q.mem[off:])
	return q.mem[off+wire.HeaderSize : off+wire.HeaderSize+int(h.FragLen)], h
}

// giveBack hands a buffer back to the reactor for re-posting and reports
// whether the reactor should be told now. Any goroutine.
func (q *recvQueue) giveBack(slot uint32) bool {
	q.freeMu.Lock()
	q.free.Push(slot)
	n := q.free.Len()
	q.freeMu.Unlock()
	return n >= q.kickAt || q.urgent.Load()
}
