package netio

import (
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"time"

	"github.com/netio-go/netio/internal/lifecycle"

	"github.com/netio-go/netio/internal/wire"
)

// A large message written to a LowLatency connection is not copied into
// send buffers: each buffer it needs carries only its header (and the
// message's length, in the first), and the reactor sends the rest from the
// caller's slice, gathered behind the header into one fabric send
// (ofi.Endpoint.PostSendTail). On the wire and at the receiver nothing
// changes: the buffers are the pages a copy would have made. Write then
// returns once those sends completed, as *net.TCPConn's Write returns once
// the kernel took the bytes, so the caller may reuse its slice as with any
// Write. A buffer the peer has no credit for is copied in after all
// (takeBack), so Write never waits for the peer's reader longer than a
// copying Write would.
//
// Why: in one process the writer's copy competes with the reactor for the
// CPUs, and sending from the slice doubled a 1 MiB stream; HighThroughput
// keeps copying, as it was no faster there (docs/decisions/2026-11-23-send-from-slice.md).
//
// Only where the provider needs no registration of local memory
// (FI_MR_LOCAL unset, as on tcp) and gathers two pieces per send; on verbs
// the caller's memory would have to be registered per message, and a
// Write copies as before.

// lendMin is the smallest message sent from the caller's memory; it must
// also fill at least half of a send buffer's payload, so that the messages
// a buffer would have packed together are still copied and packed.
const lendMin = 256 << 10

// lends reports whether a message of n bytes goes from the caller's
// memory. Not on the reactor (a Write in OnMessage), which could not wait
// for its own completions.
func (s *sender) lends(n int) bool {
	return s.lend && n >= lendMin && 2*n >= s.q.bufSize-wire.HeaderSize && !s.l.eng.r.OnReactor()
}

// Who has a lent buffer's tail (sendQueue.lent). The writer publishes it
// waiting; the reactor posts it, or finds no credit for it and marks it
// stalled; the writer may take back a waiting or stalled one, copies the
// tail into the buffer and hands it over as an ordinary one (lentNone).
// Every change but the writer's final store is a compare-and-swap, so
// the two never both have it.
const (
	lentNone    uint32 = iota // not lent, or copied in: the buffer holds it all
	lentWaiting               // published, not posted yet
	lentStalled               // the reactor found no credit for it
	lentTaken                 // the writer is copying it in
	lentPosted                // posted: the provider has the tail until completion
)

// writeLent is writeMessage for a message that lends: inside the gate,
// after writable. The gate stays held until the message is sent or copied
// in, so that this writer is the only one waiting on the send queue's
// doorbell.
func (s *sender) writeLent(ctx context.Context, p []byte) (int, error) {
	w := s.frames
	if s.open {
		s.publish(flushFull) // what was written before goes first
	}
	// The provider keeps pointers into p until the sends complete.
	s.pin.Pin(&p[0])
	defer s.pin.Unpin()
	n, off := len(p), 0
	first := s.q.head.Load()
	for off < n {
		cont := uint64(0)
		if off > 0 {
			cont = uint64(min(n-off, w.PayloadMax()))
		}
		if err := s.openNext(ctx, cont); err != nil {
			if off == 0 {
				return 0, err
			}
			// Part of the message is on its way: the stream cannot go on.
			s.failed = err
			s.gate.Stop()
			s.awaitLent(first, s.q.head.Load())
			return off, err // as writeMessage: what was published goes out
		}
		if off == 0 {
			w.PutPrefix(n)
		}
		k := min(w.Room(), n-off)
		w.Skip(k) // sent from p, not from the buffer
		s.tail = p[off : off+k]
		off += k
		if off == n {
			s.msgs++
			s.bytes += uint64(n)
			s.stats.messagesLent.Add(1)
		}
		s.publish(flushFull)
	}
	if err := s.awaitLent(first, s.q.head.Load()); err != nil {
		return 0, err
	}
	return n, nil
}

// awaitLent waits until no buffer of [first, end) has its tail in the
// provider: each was sent, or copied in by takeBack because the reactor
// found no credit for it, the deadline passed or Close came. A posted
// one holds a credit, so the peer has a buffer posted for it and it
// completes without the peer's reader; a link that cannot deliver it
// fails and closes its endpoint, and then the provider is done with it
// too.
func (s *sender) awaitLent(first, end uint64) error {
	q, c := s.q, s.side
	backoff := 10 * time.Microsecond
	for {
		q.waiting.Store(true)
		force := s.closed.Load() || expired(&s.deadline)
		busy, copied := false, false
		for seq := first; seq < end; seq++ {
			lent := &q.lent[seq%uint64(q.slots)]
			switch st := lent.Load(); {
			case st == lentStalled || force && st == lentWaiting:
				if s.takeBack(seq, st) {
					copied = true
				} else {
					busy = true
				}
			case st != lentNone:
				busy = true
			}
		}
		if copied {
			s.l.kick()
		}
		if !busy {
			c.stopWaiting(&q.waiting)
			return nil
		}
		if s.l.life.Ended() {
			// The link failed and polls its completion queue no more, so
			// a posted send will not complete; its endpoint stays open
			// until Close, which may never come from a writer blocked
			// here. Return, leaving the slice pinned to the link until
			// the endpoint is closed: it cannot be freed while the
			// provider may still point at it (on tcp, whose progress is
			// manual, nothing reads it without the completion queue
			// being polled).
			c.stopWaiting(&q.waiting)
			s.l.holdPinned(s.pin)
			s.pin = runtime.Pinner{}
			return s.deadErr()
		}
		err := q.wake.Wait()
		c.stopWaiting(&q.waiting)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			// The write deadline, which a posted send cannot honour:
			// poll until it completes.
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Millisecond)
		case err != nil: // the doorbell closed: so did the endpoint
			if s.closed.Load() {
				return c.opError("write", net.ErrClosed)
			}
			if s.l.life.Ended() {
				return s.deadErr()
			}
			return c.opError("write", err)
		}
	}
}

// takeBack copies the tail of buffer seq into the buffer, unless the
// reactor posted it meanwhile, and reports whether it did.
func (s *sender) takeBack(seq uint64, st uint32) bool {
	q := s.q
	slot := int(seq % uint64(q.slots))
	if !q.lent[slot].CompareAndSwap(st, lentTaken) {
		return false
	}
	tail := q.tails[slot]
	copy(q.mem[slot*q.bufSize+int(q.lens[slot])-len(tail):], tail)
	q.tails[slot] = nil
	q.lent[slot].Store(lentNone)
	s.stats.lentCopied.Add(1)
	return true
}

// holdPinned keeps pin's objects pinned until the link's endpoint is
// closed. Any goroutine.
func (l *link) holdPinned(pin runtime.Pinner) {
	if l.eng.r.SubmitFunc(func() {
		if l.life.State() == lifecycle.Closed {
			pin.Unpin()
			return
		}
		l.pinned = append(l.pinned, pin)
	}) != nil {
		pin.Unpin() // the reactor is gone, and so is every endpoint
	}
}

// unpinAll releases what holdPinned kept, once the endpoint is closed.
// On the reactor.
func (l *link) unpinAll() {
	for i := range l.pinned {
		l.pinned[i].Unpin()
	}
	l.pinned = nil
}
