package netio

import (
	"errors"
	"runtime"
	"time"

	"github.com/netio-go/netio/internal/lifecycle"

	"github.com/netio-go/netio/internal/credit"
	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/ofi"
)

// A link's close: the FIN after what was written, the linger, and the
// release of its libfabric objects.

// stopCQ stops watching the queue of a link that has ended, so a dead
// endpoint cannot keep the reactor awake.
func (l *link) stopCQ() {
	if l.res.cqWatched {
		l.eng.r.Unregister(l.res.cq.FD())
		l.res.cqWatched = false
	}
	l.eng.forget(l)
	l.eng.clock.cancel(&l.phase)
	l.stopBeat()
}

// close starts an orderly close: what was written is sent, then FIN, and
// the link is released once every send has completed or linger has
// passed. It does not wait; life.released is closed at the end. On the
// reactor.
func (l *link) close() {
	switch l.life.State() {
	case lifecycle.Connecting, lifecycle.Ended:
		l.finishClose()
	case lifecycle.Open:
		l.life.Drain(l.cfg.linger)
		// The owner's readers are gone: unread buffers are ours.
		for {
			slot, ok := l.rx.ready.Pop()
			if !ok {
				break
			}
			l.rxReclaim = append(l.rxReclaim, slot)
		}
		l.eng.clock.at(&l.phase, l.life.LingerUntil)
		l.service()
	}
}

// closeAndWait closes a link that never reached its user (a Dial that
// failed) and waits for it to let go. Not on the reactor.
func (l *link) closeAndWait() {
	if l.eng.r.SubmitFunc(l.close) == nil {
		<-l.life.Released()
	}
}

// closeWrite closes the owner's writing side and not the link: FIN goes
// once everything written is posted, and the link goes on receiving. A
// later close sends no second FIN. On the reactor.
func (l *link) closeWrite() {
	if l.life.State() != lifecycle.Open {
		return // closing sends FIN itself; an ended link sends nothing
	}
	l.shutWrite = true
	l.service()
}

// sendFin sends FIN, once, when everything written is posted (or is
// being dropped), with the owner's farewell as its payload.
func (l *link) sendFin() {
	if l.finSent || !l.dropping && (l.txPosted != l.tx.head.Load() || len(l.ctlOut) > 0) {
		return
	}
	if l.farewell != nil {
		l.finPayload = l.farewell(l.dropping)
		l.farewell = nil
	}
	var flags uint8
	if l.shutWrite {
		flags = wire.FlagHalfClose
	}
	if l.finPayload == nil {
		l.finSent = l.sendControl(wire.KindFin, flags)
		return
	}
	slot, ok := l.res.ctl.free()
	if !ok || !l.credit.CanTake(credit.Control) {
		return
	}
	give, _ := l.credit.Take(credit.Control)
	if err := l.res.ctl.send(&l.res, slot, wire.KindFin, flags, give, l.finPayload); err != nil {
		l.credit.Undo(give)
		if !errors.Is(err, ofi.EAGAIN) {
			l.fail(err)
		}
		return
	}
	l.finSent = true
	l.eng.markDirty(l)
}

// closeNow closes l at once for its owner: what was written and not
// posted is dropped, the owner's control messages too, and FIN goes with
// the farewell as soon as a credit allows, the last one included. On the
// reactor.
func (l *link) closeNow() {
	l.dropping = true
	l.ctlOut = nil
	if l.life.State() == lifecycle.Draining {
		l.service()
		return
	}
	l.close()
}

// continueClose sends FIN once everything written is posted, and finishes
// once every send has completed, so fi_shutdown loses nothing; on an RDM
// endpoint, once the peer's FIN has answered ours too (rdm_link.go). It runs
// from service, which a completion loop calls: the finish waits for the
// loop's end.
func (l *link) continueClose() {
	l.sendFin()
	if l.finSent && l.tx.done.Load() == l.txPosted && l.res.ctl.idle() && (l.finRecv || !l.finEnds()) {
		l.afterLoop(endClose)
	}
}

// lingerExpired reports whether a draining link has waited long enough,
// and if so finishes it.
func (l *link) lingerExpired(now time.Time) bool {
	if !now.After(l.life.LingerUntil) {
		return false
	}
	if (l.farewell != nil || l.finPayload != nil) && !l.dropping && !l.finSent {
		// The owner says what did not go: one more while for its FIN,
		// which may take the last credit.
		l.life.LingerUntil = now.Add(min(l.cfg.linger, farewellGrace))
		l.closeNow()
		return l.life.State() == lifecycle.Closed
	}
	l.finishClose()
	return true
}

// farewellGrace bounds how long a link that gave up on its data waits for
// its FIN, with the owner's farewell, to go.
const farewellGrace = time.Second

// finishClose tears the endpoint down and frees everything.
func (l *link) finishClose() {
	if l.life.State() == lifecycle.Closed {
		return
	}
	if !l.life.Ended() && l.life.WasOpen() && l.res.ep != nil {
		l.res.ep.Shutdown() // RDM has none: the FIN said it
	}
	l.releaseResources()
	l.life.Release()
	l.owner.released(l)
	l.eng.release()
}

// releaseResources closes in libfabric's order: endpoint, then the drained
// queue, then the memory it pointed at.
func (l *link) releaseResources() {
	e, res := l.eng, &l.res
	l.stopCQ()
	if res.token != 0 {
		delete(e.targets, res.token)
	}
	if res.ep != nil {
		res.ep.Close()
		res.ep = nil
		res.port = nil
	}
	if p, ok := res.port.(*rdmPeer); ok {
		p.release(l) // the regions go with the endpoint's retired
		res.port = nil
	}
	l.unpinAll() // no provider points at a writer's slice now (send_from_slice.go)
	if res.cq != nil {
		for i := 0; i < 16; i++ {
			n, err := res.cq.Read(e.cqBuf[:])
			if err != nil {
				var ce ofi.CompletionError
				res.cq.ReadError(&ce)
				continue
			}
			if n == 0 {
				break
			}
		}
		res.cq.Close()
		res.cq = nil
	}
	if res.rxRegion != nil && l.rx.held.Load() {
		// Messages from NextMessage may still point into the receive
		// buffers: unmap them only once they and the link are garbage.
		res.rxRegion.Deregister()
		runtime.AddCleanup(l, func(r *ofi.Region) { r.Close() }, res.rxRegion)
		res.rxRegion = nil
	}
	for _, r := range []**ofi.Region{&res.rxRegion, &res.txRegion} {
		if *r != nil {
			(*r).Close()
			*r = nil
		}
	}
	res.ctl.close()
	registered.Release(res.reserved)
	res.reserved = 0
	l.tx.wake.Close()
	l.rx.wake.Close()
	if res.dom != nil {
		res.dom.release()
		res.dom = nil
	}
	if res.fab != nil {
		res.fab.release()
		res.fab = nil
	}
}
