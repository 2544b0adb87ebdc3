package netio

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/netio-go/netio/internal/lifecycle"

	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/ofi"
)

// checkData vets the header of a data buffer from the peer on the reactor,
// before anyone reads it.
func (l *link) checkData(h wire.Header) error {
	if !l.cfg.takesData {
		return fmt.Errorf("%w: a subscriber sent data (kind %d); a publisher takes only requests", ErrProtocol, h.Kind)
	}
	return l.cfg.framing.Check(h)
}

// cqHandler is the link as the handler of its completion queue's fd.
type cqHandler link

// HandleEvents drains the queue and re-arms its wait fd, which stays
// readable (and would keep the reactor spinning) until fi_trywait succeeds.
// A link already in the engine's busy list is read by the engine's poll in
// its turn (bulk links after latency-sensitive ones, one slice each): here
// it is only re-armed, if it is quiet.
//
// Heartbeats alone are background work for the reactor: they start no spin
// (a link listed is the engine poll's to judge, in this round).
func (h *cqHandler) HandleEvents(uint32) {
	l := (*link)(h)
	if l.dirty {
		l.res.fab.fabric.TryWait(&l.res.cqWait)
		l.eng.r.Background()
		return
	}
	l.polling = true
	quiet := false
	for i := 0; i < 8 && !quiet && l.ending == 0; i++ {
		l.pollCQ()
		ok, err := l.res.fab.fabric.TryWait(&l.res.cqWait)
		quiet = ok || err != nil
	}
	if !quiet && l.ending == 0 {
		l.eng.markDirty(l) // still busy: the poller takes it from here
	}
	if l.onlyBeats() && l.ending == 0 {
		l.eng.r.Background()
		if quiet && l.settled() {
			// A heartbeat, and the queue armed after it: nothing
			// follows, so the busy list need not read it again.
			l.eng.forget(l)
		}
	}
	l.endLoop()
}

// pollCQ reads l's completions and reports whether there were any; not
// before the link has been open (see watchCQ).
func (l *link) pollCQ() bool {
	cq := l.res.cq
	if cq == nil || !l.life.WasOpen() {
		return false
	}
	e := l.eng
	busy, heard := false, false
	outer := !l.polling
	l.polling = true
	for {
		n, err := cq.Read(e.cqBuf[:])
		if err != nil {
			var ce ofi.CompletionError
			if ok, _ := cq.ReadError(&ce); ok {
				busy = true
				l.onCompletionError(&ce)
				continue
			}
			break
		}
		if n == 0 {
			break
		}
		busy = true
		for i := range n {
			cmp := &e.cqBuf[i]
			if cmp.Token == ofi.TrapToken {
				l.foreignOp()
				continue
			}
			heard = l.complete(cmp.Token, cmp.Len) || heard
		}
		if n < len(e.cqBuf) {
			break
		}
	}
	return l.polled(busy, heard, outer)
}

// complete takes one completion of l's, by token, and reports whether it
// was a receive.
func (l *link) complete(token, n uint64) bool {
	slot := uint32(token)
	switch token & tokKindMask {
	case tokRecv:
		l.onRecv(slot, n)
		return true
	case tokSend:
		l.worked = true
		l.onSent(slot)
	case tokCtl:
		l.worked = true
		l.res.ctl.done(slot)
	}
	return false
}

// polled ends a read of l's completions: busy, some were read (heard: a
// receive among them); outer, the read began the completion loop.
func (l *link) polled(busy, heard, outer bool) bool {
	e := l.eng
	if heard && l.hb.timeout > 0 {
		l.hb.heardAt = time.Now() // the heartbeat check's (heartbeat.go)
	}
	if outer {
		l.endLoop()
		if l.life.State() == lifecycle.Closed {
			return busy
		}
	}
	if busy {
		e.markDirty(l)
		if l.rxNotify {
			l.rxNotify = false
			l.notify(&l.rx.waiting, l.rx.wake)
		}
		if l.sliced() {
			l.postLater = true // after the latency-sensitive links' turn
		} else {
			l.service()
		}
	}
	return busy
}

// queue is the link as the engine sees it: a completion queue to poll.
func (l *link) queue() (*fabricRes, *ofi.CQ) { return l.res.fab, l.res.cq }

// setDirty sets the mark that l is in the engine's busy list and returns
// the old one.
func (l *link) setDirty(d bool) bool {
	was := l.dirty
	l.dirty = d
	if !d {
		l.worked = false
	}
	return was
}

// onlyBeats: see driven.
func (l *link) onlyBeats() bool { return !l.worked }

// settled: see driven. A send in flight may be one the provider still
// holds; deferred work (postLater) is done only in the engine's rounds.
func (l *link) settled() bool {
	return !l.postLater && l.tx.done.Load() == l.txPosted && l.txPosted >= l.tx.head.Load() && l.res.ctl.idle()
}

func (l *link) onCompletionError(ce *ofi.CompletionError) {
	if errors.Is(&ce.AsyncError, ofi.ECANCELED) {
		return // buffers flushed by a shutdown or close
	}
	if ce.Token == ofi.TrapToken {
		l.foreignOp() // a forged tagged message too large for the trap
		return
	}
	err := error(&ce.AsyncError)
	if l.finRecv {
		// The peer closed in order and is gone: what we still tried to
		// send fails, but reading ends with io.EOF as usual.
		err = io.EOF
	} else if errors.Is(err, ofi.ETRUNC) {
		err = fmt.Errorf("%w: peer sent a message larger than the receive buffer", ErrProtocol)
	}
	l.fail(err)
}

// foreignOp ends a link whose peer sent a libfabric tagged message, caught
// by the ofi guard's trap: netio never sends one, and without the trap the
// tcp provider would have crashed the process on it.
func (l *link) foreignOp() {
	l.protocolError("peer sent a libfabric tagged message, which netio never uses")
}

// onSent frees a send buffer; completions may come out of order.
func (l *link) onSent(slot uint32) {
	if int(slot) >= len(l.txCompleted) {
		return
	}
	l.txCompleted[slot] = true
	l.txInFlight -= int(l.tx.lens[slot])
	if l.tx.lent[slot].Load() != lentNone {
		l.tx.tails[slot] = nil
		l.tx.lent[slot].Store(lentNone) // the writer's memory is its own again
	}
	slots := uint64(l.tx.slots)
	done := l.tx.done.Load()
	for l.txCompleted[done%slots] && done < l.txPosted {
		l.txCompleted[done%slots] = false
		done++
	}
	l.tx.done.Store(done)
	l.notify(&l.tx.waiting, l.tx.wake)
}

// onRecv checks and routes one received buffer.
func (l *link) onRecv(slot uint32, n uint64) {
	if !l.life.Accepting() {
		return
	}
	if int(slot) >= len(l.rx.refs) {
		l.protocolError("completion for unknown buffer %d", slot)
		return
	}
	l.credit.Used()
	if n < wire.HeaderSize {
		l.protocolError("truncated message of %d bytes", n)
		return
	}
	b := l.rx.mem[int(slot)*l.rx.bufSize:]
	h := wire.ReadHeader(b)
	if uint64(h.FragLen)+wire.HeaderSize != n {
		l.protocolError("header says %d bytes, %d arrived", h.FragLen, n-wire.HeaderSize)
		return
	}
	if err := l.credit.Give(h.Credits); err != nil {
		l.fail(err)
		return
	}
	if h.Kind != wire.KindHeartbeat {
		l.worked = true
	}
	switch {
	case wire.DataKind(h.Kind):
		l.stats.buffersReceived.Add(1)
		if err := l.checkData(h); err != nil {
			l.fail(err)
			return
		}
		if l.finRecv {
			l.protocolError("data after the peer closed")
			return
		}
		switch {
		case l.onMessage != nil:
			l.deliverInline(slot, h)
		case l.life.ClosedByOwner():
			// Nobody will read it. Dropping it returns the credit, so a
			// peer stuck writing to us can finish too.
			l.rxReclaim = append(l.rxReclaim, slot)
		default:
			l.rx.ready.Push(slot)
			l.rxNotify = true
		}
	case h.Kind == wire.KindCredit:
		l.credit.Quietly()
		l.rxReclaim = append(l.rxReclaim, slot) // no reader involved: re-post at once
	case h.Kind == wire.KindHeartbeat:
		if h.FragLen != 0 {
			l.protocolError("heartbeat with a payload of %d bytes", h.FragLen)
			return
		}
		l.rxReclaim = append(l.rxReclaim, slot) // the peer's reader may be stopped: re-post at once
		l.onHeartbeat(h.MsgLen)
	case h.Kind == wire.KindFin:
		if h.FragLen > 0 { // the owner's farewell
			if err := l.owner.control(l, wire.KindFin, b[wire.HeaderSize:wire.HeaderSize+int(h.FragLen)]); err != nil {
				l.fail(err)
				return
			}
		}
		l.finRecv = true
		if h.Flags&wire.FlagHalfClose != 0 {
			l.rx.fin.Store(true) // after the data before it, in ready
			l.rxNotify = true    // a waiting reader reads io.EOF
		} else if l.finEnds() {
			l.peerFinished()
		}
		l.rxReclaim = append(l.rxReclaim, slot)
	default:
		if l.finRecv {
			l.protocolError("message of kind %d after the peer closed", h.Kind)
			return
		}
		payload := b[wire.HeaderSize : wire.HeaderSize+int(h.FragLen)]
		l.ctlSlot = slot
		err := l.owner.control(l, h.Kind, payload)
		if l.ctlHeld {
			l.ctlHeld = false // the owner posts it again (releaseControl)
		} else {
			l.rxReclaim = append(l.rxReclaim, slot)
		}
		if err != nil {
			l.fail(err)
		}
	}
}

// holdControl keeps the buffer of the control message that owner.control
// is handling from being posted again until releaseControl: the peer's
// credits then bound the messages its owner has yet to handle. On the
// reactor, inside owner.control.
func (l *link) holdControl() uint32 {
	l.ctlHeld = true
	return l.ctlSlot
}

// releaseControl posts again a buffer held by holdControl. On the reactor.
func (l *link) releaseControl(slot uint32) {
	if l.life.Accepting() {
		l.rxReclaim = append(l.rxReclaim, slot)
		l.service()
	}
}

// deliverInline hands the messages of a buffer to onMessage on the reactor.
func (l *link) deliverInline(slot uint32, h wire.Header) {
	off := int(slot) * l.rx.bufSize
	l.rxReclaim = append(l.rxReclaim, slot)
	if err := l.inline.Deliver(l.rx.mem[off+wire.HeaderSize:off+wire.HeaderSize+int(h.FragLen)], h, l.onMessage); err != nil {
		l.fail(err)
	}
}
