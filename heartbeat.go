package netio

import (
	"errors"
	"syscall"
	"time"

	"github.com/netio-go/netio/internal/credit"
	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/ofi"
)

// Heartbeats notice a peer that went silent: a process stopped or hung, a
// machine that died without its kernel closing the socket, a cut cable.
// The transport would not: libfabric's tcp provider hears of a cut link
// only when the kernel gives up retransmitting, about 15 minutes on Linux,
// and a stopped process's kernel keeps acknowledging what it cannot read.
//
// Anything received counts as a sign of life. A link that has sent nothing
// for its interval sends a heartbeat: a header-only message from a control
// slot, which may use the credit kept back for control messages, so it
// goes even when the peer's reader has stopped reading (a slow reader is
// alive: its reactor re-posts the heartbeat's buffer at once and returns
// the credit). A link that hears nothing for its timeout ends with
// ErrPeerTimeout.
//
// One engine timer scans the links at half the shortest interval; the fast
// path pays nothing: the scan compares the counters the link keeps anyway
// (buffers sent and received) with what it saw last time.
//
// A heartbeat's msgLen is the sender's timeout in milliseconds (0: it
// checks nothing), so that a peer configured to send less often than this
// side expects sends more often, and a side that does not check still
// answers one that does.

// beatConfig is a link's heartbeat settings, from its owner's Config.
type beatConfig struct {
	interval time.Duration // send after this long without sending
	timeout  time.Duration // end the link after this long without hearing; 0: never
}

func beatConfigOf(c *Config) beatConfig {
	b := beatConfig{interval: c.HeartbeatInterval}
	if c.HeartbeatTimeout > 0 {
		b.timeout = c.HeartbeatTimeout
	}
	return b
}

// minBeatInterval bounds how often a link sends heartbeats, whatever its
// peer asks for.
const minBeatInterval = 10 * time.Millisecond

// heartbeat is a link's liveness bookkeeping. Reactor only.
type heartbeat struct {
	every    time.Duration // send a heartbeat after this long without sending; 0: none
	timeout  time.Duration // from beatConfig
	watched  bool          // in engine.beating, at index
	index    int
	pending  bool      // a heartbeat is due and waits for a credit or a slot
	dialed   bool      // this side connected: it may take the last credit (see sendHeartbeat)
	ctlHeard uint64    // control messages received (data ones are in stats)
	heard    uint64    // messages received at the last scan
	heardAt  time.Time // when heard last changed
	sent     uint64    // messages sent at the last send check
	sentAt   time.Time // the last send, at the earliest
	checked  time.Time // the last send check
	nextSend time.Time // the next send check
}

// startBeat starts the heartbeats of a link that has just come up. On the
// reactor.
func (l *link) startBeat() {
	hb := &l.hb
	hb.timeout = l.cfg.beat.timeout
	if hb.timeout > 0 {
		hb.every = l.cfg.beat.interval
	}
	if hb.every > 0 {
		l.eng.watchBeat(l)
	}
	if hb.timeout > 0 && !hb.dialed {
		// The peer learns our timeout at once, before the owner can
		// write and while credits are many: an accepting side that
		// starts streaming to a slow reader may not send a bare
		// heartbeat again until its peer sends something
		// (sendHeartbeat), and a peer that does not check sends nothing
		// unless asked.
		l.sendHeartbeat()
	}
}

// onHeartbeat takes a heartbeat that says the peer checks for our
// heartbeats every timeoutMS milliseconds (0: it does not): this side
// sends often enough for that, even if it checks nothing itself.
func (l *link) onHeartbeat(timeoutMS uint64) {
	if timeoutMS == 0 {
		return
	}
	ms := min(timeoutMS, uint64(time.Hour/time.Millisecond))
	every := max(time.Duration(ms)*time.Millisecond/3, minBeatInterval)
	hb := &l.hb
	if hb.every != 0 && hb.every <= every {
		return
	}
	hb.every = every
	hb.pending = true // service sends it: the peer may be counting already
	l.eng.watchBeat(l)
}

// sendHeartbeat sends a heartbeat, with the credits owed, if a control
// slot (leaving one for credit returns and FIN) and a credit allow, and
// otherwise leaves it pending for service.
//
// The last credit, kept back from data, is what lets a side whose peer
// stopped reading still be heard. But it must come back: when both sides
// hold every buffer the other filled (neither reads), two heartbeats that
// cross, each on its side's last credit, would leave both sides without a
// credit to return the other's. So only the side that dialed takes the
// last credit for a bare heartbeat; the other one takes it only to return
// credits, which lets the dialer answer.
func (l *link) sendHeartbeat() {
	hb := &l.hb
	hb.pending = true
	slot, ok := l.res.ctl.freeLeavingOne()
	if !ok || !l.credit.CanTake(credit.Control) {
		return
	}
	if !l.credit.CanTake(credit.Data) && !hb.dialed && !l.credit.Owing() {
		return
	}
	give, _ := l.credit.Take(credit.Control)
	h := wire.Header{Kind: wire.KindHeartbeat, Flags: wire.FlagLast, Credits: give, MsgLen: uint64(hb.timeout / time.Millisecond)}
	// Injected, a heartbeat has no completion to wait for: the link stays
	// out of the engine's busy list, which thousands of idle links
	// beating would otherwise fill for every round of a busy one.
	injected, err := l.res.ctl.inject(l.res.ep, slot, h, l.sizes.inject)
	if err == nil && !injected {
		err = l.res.ctl.post(l.res.ep, slot, h, nil)
	}
	if err != nil {
		l.credit.Undo(give)
		if !errors.Is(err, ofi.EAGAIN) {
			l.fail(err)
		}
		return
	}
	hb.pending = false
	if !injected {
		l.eng.markDirty(l)
	}
}

// beat is one scan of l at now: gap is how long since the scan before,
// longer than the timer's period when this process did not run (stopped,
// or starved of CPU), which is no fault of the peer's.
func (l *link) beat(now time.Time, gap time.Duration) {
	hb := &l.hb
	if hb.timeout > 0 {
		heard := l.stats.buffersReceived.Load() + hb.ctlHeard
		switch {
		case heard != hb.heard || gap > hb.timeout/2:
			hb.heard, hb.heardAt = heard, now
		case now.Sub(hb.heardAt) >= hb.timeout:
			// What arrived while the reactor was busy elsewhere counts.
			l.pollCQ()
			if !hb.watched {
				return // pollCQ ended it
			}
			if heard = l.stats.buffersReceived.Load() + hb.ctlHeard; heard == hb.heard {
				l.fail(peerTimeout(hb.timeout))
				return
			}
			hb.heard, hb.heardAt = heard, now
		}
	}
	if hb.every > 0 && !now.Before(hb.nextSend) {
		// Checked every half interval. What was sent since the last
		// check may have gone right after it: so no gap exceeds the
		// interval by more than the scan's lateness, a heartbeat goes
		// when that check was (nearly) an interval ago.
		if sent := l.stats.buffersSent.Load() + l.res.ctl.sent; sent != hb.sent {
			hb.sent, hb.sentAt = sent, hb.checked
		}
		if hb.pending || now.Sub(hb.sentAt) >= hb.every-hb.every/4 {
			l.sendHeartbeat()
			if !hb.pending {
				hb.sent, hb.sentAt = l.stats.buffersSent.Load()+l.res.ctl.sent, now
			}
		}
		hb.checked, hb.nextSend = now, now.Add(hb.every/2)
	}
}

// beatPeriod is how often l needs to be scanned.
func (hb *heartbeat) beatPeriod() time.Duration {
	return max(hb.every/2, minBeatInterval/2)
}

// watchBeat puts l in the scan, or makes the scan as frequent as l now
// needs. On the reactor.
func (e *engine) watchBeat(l *link) {
	hb := &l.hb
	now := time.Now()
	if !hb.watched {
		if len(e.beating) == 0 {
			e.beatLast = now
		}
		hb.watched, hb.index = true, len(e.beating)
		e.beating = append(e.beating, l)
		hb.heard, hb.heardAt = l.stats.buffersReceived.Load()+hb.ctlHeard, now
		hb.sent, hb.sentAt, hb.checked = l.stats.buffersSent.Load()+l.res.ctl.sent, now, now
	}
	hb.nextSend = now.Add(hb.every / 2)
	if p := hb.beatPeriod(); e.beatPeriod == 0 || p < e.beatPeriod {
		e.beatPeriod = p
		e.beat.Start(p)
	}
}

// forgetBeat takes l out of the scan. On the reactor.
func (e *engine) forgetBeat(l *link) {
	hb := &l.hb
	if !hb.watched {
		return
	}
	hb.watched = false
	last := len(e.beating) - 1
	moved := e.beating[last]
	e.beating[hb.index], e.beating[last] = moved, nil
	moved.hb.index = hb.index
	e.beating = e.beating[:last]
	if last == 0 {
		e.beatPeriod = 0
		e.beat.Stop()
	}
}

// onBeat scans every watched link: heartbeats due go out, silent peers
// end their links. The timer then runs as often as the most demanding
// link needs.
func (e *engine) onBeat() {
	now := time.Now()
	gap := now.Sub(e.beatLast)
	e.beatLast = now
	var period time.Duration
	for i := 0; i < len(e.beating); {
		l := e.beating[i]
		l.beat(now, gap)
		// A link that ended left the list, and the last one took its
		// place: look at the same index again.
		if i < len(e.beating) && e.beating[i] == l {
			if p := l.hb.beatPeriod(); period == 0 || p < period {
				period = p
			}
			i++
		}
	}
	if len(e.beating) > 0 && period != e.beatPeriod {
		e.beatPeriod = period
		e.beat.Start(period)
	}
}

// peerTimeoutError is ErrPeerTimeout with the time waited: it matches
// ErrPeerTimeout and syscall.ETIMEDOUT (see ErrPeerTimeout).
type peerTimeoutError struct{ after time.Duration }

func peerTimeout(after time.Duration) error { return &peerTimeoutError{after} }

func (e *peerTimeoutError) Error() string {
	return "netio: peer not heard for " + e.after.String()
}

func (e *peerTimeoutError) Is(target error) bool {
	return target == ErrPeerTimeout || target == syscall.ETIMEDOUT
}

// Timeout reports true, as for a TCP keep-alive's ETIMEDOUT.
func (e *peerTimeoutError) Timeout() bool { return true }

// Temporary reports false: the connection is over.
func (e *peerTimeoutError) Temporary() bool { return false }
