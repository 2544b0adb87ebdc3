package netio

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/netio-go/netio/internal/lifecycle"

	"github.com/netio-go/netio/internal/credit"
	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/ofi"
)

// service posts what is ready: receive buffers handed back, written
// buffers the credits allow, credit returns, and the closing FIN.
func (l *link) service() {
	if !l.life.Accepting() {
		return
	}
	e, res := l.eng, &l.res
	// Receive buffers first: they become credits for the peer.
	segs := e.segBuf[:0]
	for {
		slot, ok := l.rx.free.Pop()
		if !ok {
			break
		}
		l.rxReclaim = append(l.rxReclaim, slot)
	}
	for _, slot := range l.rxReclaim {
		segs = append(segs, ofi.Segment{Offset: uint64(int(slot) * l.rx.bufSize), Len: uint64(l.rx.bufSize), Token: tokRecv | uint64(slot)})
	}
	l.rxReclaim = l.rxReclaim[:0]
	if len(segs) > 0 {
		n, err := res.postRecv(res.rxRegion, segs)
		l.credit.Owe(n)
		for _, sg := range segs[n:] { // a full queue: again after the next completion
			l.rxReclaim = append(l.rxReclaim, uint32(sg.Token))
		}
		if err != nil && !errors.Is(err, ofi.EAGAIN) {
			l.fail(err)
			return
		}
	}
	// The owner's control messages go before the data written after
	// them (a publisher's acknowledgement before the messages it
	// announces), so data waits while any do.
	l.sendQueuedControl()
	if l.packed != nil && l.txPosted == l.tx.head.Load() && len(l.ctlOut) == 0 && l.credit.CanTake(credit.Data) {
		l.packed.sealOpen() // what was written while the sends went out, in one
	}
	// Data, as far as the window allows: it keeps one credit back.
	posted := false
	for {
		var tail []byte
		segs, tail = l.gatherData(segs[:0])
		if len(segs) == 0 {
			break
		}
		all, err := l.postData(segs, tail)
		posted = true
		if err != nil {
			l.fail(err)
			return
		}
		if !all {
			break
		}
	}
	e.segBuf = segs[:0]
	if l.hb.pending { // its turn came without a credit or slot for it
		l.sendHeartbeat()
	}
	// An explicit credit return when enough is owed or the peer is stuck.
	// After the peer's FIN it sends no data, but a peer that only closed
	// its writing side (CloseWrite) still reads, and returns our credits
	// in control messages that need credits of their own: these must keep
	// coming back, or both sides could end up waiting for the other's.
	if l.credit.Returnable() {
		l.sendControl(wire.KindCredit, 0)
	}
	l.rx.urgent.Store(l.credit.PeerStarved())
	switch {
	case l.life.State() == lifecycle.Draining:
		l.continueClose()
	case l.shutWrite:
		l.sendFin()
	}
	if posted || l.credit.Owing() {
		e.markDirty(l)
	}
}

// gatherData takes the published send buffers that the window and the
// slice allow, in order, into segs, up to the first whose payload lies in
// the writer's memory (send_from_slice.go): that one goes alone, with its tail.
func (l *link) gatherData(segs []ofi.Segment) ([]ofi.Segment, []byte) {
	head := l.tx.head.Load()
	slots := uint64(l.tx.slots)
	for l.txPosted < head && len(l.ctlOut) == 0 && !l.dropping {
		slot := int(l.txPosted % slots)
		lent := &l.tx.lent[slot]
		st := lent.Load()
		if st != lentNone && len(segs) > 0 || st == lentTaken {
			break // a lent one goes alone; a taken one is being copied in
		}
		if !l.mayPost(int(l.tx.lens[slot])) {
			l.stallLent(lent, st)
			break
		}
		give, ok := l.credit.Take(credit.Data)
		if !ok {
			l.stallLent(lent, st)
			break
		}
		if st != lentNone && !lent.CompareAndSwap(st, lentPosted) {
			l.credit.Undo(give) // the writer took it back: it kicks once copied
			break
		}
		wire.PutCredits(l.tx.mem[slot*l.tx.bufSize:], give)
		l.gives = append(l.gives, give)
		segs = append(segs, ofi.Segment{Offset: uint64(slot * l.tx.bufSize), Len: uint64(l.tx.lens[slot]), Token: tokSend | uint64(slot)})
		l.txPosted++
		l.txInFlight += int(l.tx.lens[slot])
		l.worked = true
		if st != lentNone {
			tail := l.tx.tails[slot]
			segs[0].Len -= uint64(len(tail)) // the header part, in the buffer
			return segs, tail
		}
	}
	return segs, nil
}

// stallLent tells the writer of a lent buffer that it waits for credit
// (or for the slice): the writer copies it in and returns, as a Write
// that copies would have (send_from_slice.go).
func (l *link) stallLent(lent *atomic.Uint32, st uint32) {
	if st == lentWaiting && lent.CompareAndSwap(lentWaiting, lentStalled) {
		l.notify(&l.tx.waiting, l.tx.wake)
	}
}

// postData posts what gatherData took and reports whether all of it went
// out; what did not (a full queue, EAGAIN on verbs) is taken back, credits
// and all, and posted after the next completion.
func (l *link) postData(segs []ofi.Segment, tail []byte) (bool, error) {
	res := &l.res
	var n int
	var err error
	if tail != nil {
		if err = res.postSendTail(res.txRegion, segs[0], tail); err == nil {
			n = 1
		}
	} else {
		n, err = res.postSend(res.txRegion, segs, l.sizes.inject)
	}
	l.stats.buffersSent.Add(uint64(n))
	for i, g := range l.gives[n:] {
		slot := segs[n+i].Token &^ tokSend
		l.credit.Undo(g)
		l.txPosted--
		l.txInFlight -= int(l.tx.lens[slot])
		if tail != nil {
			l.tx.lent[slot].Store(lentWaiting)
		}
	}
	l.gives = l.gives[:0]
	// Injected sends were copied and have no completion: done now.
	// No completion brings the reactor back either, for what was
	// written meanwhile into the open buffer (packing, sender.go): a kick
	// does, on its next round.
	injected := false
	for _, sg := range segs[:n] {
		if tail == nil && int(sg.Len) <= l.sizes.inject {
			l.onSent(uint32(sg.Token))
			injected = true
		}
	}
	if injected {
		l.kick()
	}
	if err != nil && !errors.Is(err, ofi.EAGAIN) {
		return false, err
	}
	return n == len(segs), nil
}

// sendOwnerControl queues a control message of the owner's: kind and a
// payload of at most cfg.ctlPayload bytes, sent in order after the data
// written so far as credit allows. On the reactor.
func (l *link) sendOwnerControl(kind uint8, payload []byte) error {
	if len(payload) > l.cfg.ctlPayload {
		return fmt.Errorf("netio: control message of %d bytes, limit %d", len(payload), l.cfg.ctlPayload)
	}
	l.ctlOut = append(l.ctlOut, append([]byte{kind}, payload...))
	l.service()
	return nil
}

// sendQueuedControl posts the owner's queued control messages. They take
// data credits, never the reserve, and leave one control slot free for
// credit returns and FIN.
func (l *link) sendQueuedControl() {
	for len(l.ctlOut) > 0 {
		slot, ok := l.res.ctl.freeLeavingOne()
		if !ok || !l.credit.CanTake(credit.Data) {
			return
		}
		m := l.ctlOut[0]
		give, _ := l.credit.Take(credit.Data)
		if err := l.res.ctl.send(&l.res, slot, m[0], 0, give, m[1:]); err != nil {
			l.credit.Undo(give)
			if !errors.Is(err, ofi.EAGAIN) {
				l.fail(err)
			}
			return
		}
		l.ctlOut[0] = nil
		l.ctlOut = l.ctlOut[1:]
		l.eng.markDirty(l)
	}
}

// sendControl sends a header-only message (credits or FIN, with flags),
// returning everything owed, and reports whether it went out.
func (l *link) sendControl(kind, flags uint8) bool {
	slot, ok := l.res.ctl.free()
	if !ok || !l.credit.CanTake(credit.Control) {
		return false
	}
	give, _ := l.credit.Take(credit.Control)
	if err := l.res.ctl.send(&l.res, slot, kind, flags, give, nil); err != nil {
		l.credit.Undo(give)
		if !errors.Is(err, ofi.EAGAIN) {
			l.fail(err)
		}
		return false
	}
	l.eng.markDirty(l)
	return true
}
