package netio

import (
	"errors"
	"math/rand/v2"
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
// Each link has two deadlines on the engine's clock (engine_clock.go), so
// that heartbeats cost in proportion to the links due, not to all of them:
// when to look whether to send one, and when the peer is overdue. The fast
// path does not touch them. A send check compares the count of buffers sent
// (kept anyway) with the last check's, and takes a change as a send right
// after that check; the completion loop stamps the time it received
// something, and the check deadline, when it comes, moves to that time
// plus the timeout unless the peer is overdue. Links' first send checks are
// spread over half an interval, and each later one comes up to an eighth of
// an interval early, so links set up together do not beat all at once; every
// deadline is then rounded up to a grain of 1/64 of the interval (beatAt), so
// that the reactor wakes once a grain for all the links due in it. Sent,
// received and checked heartbeats are background work for the reactor: they
// start no spin of polling when they wake it (reactor.Reactor.Background).
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
	every   time.Duration // send a heartbeat after this long without sending; 0: none
	timeout time.Duration // from beatConfig
	watched bool          // send and check are on the clock
	pending bool          // a heartbeat is due and waits for a credit or a slot
	dialed  bool          // this side connected: it may take the last credit (see sendHeartbeat)
	heardAt time.Time     // when something was last received (pollCQ)
	sent    uint64        // messages sent at the last send check
	sentAt  time.Time     // the last send, at the earliest
	due     time.Time     // a heartbeat goes then if nothing else was sent
	checked time.Time     // the last send check
	send    timed         // the next send check
	check   timed         // when the peer is overdue unless heard
	second  bool          // the check was put off for the endpoint's read (onBeatCheck)
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
		l.watchBeat()
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
	l.watchBeat()
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
	injected, err := l.res.ctl.inject(&l.res, slot, h, l.sizes.inject)
	if err == nil && !injected {
		err = l.res.ctl.post(&l.res, slot, h, nil)
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

// sentCount is what l has sent, data and control messages.
func (l *link) sentCount() uint64 { return l.stats.buffersSent.Load() + l.res.ctl.sent }

// beatAt sets one of l's heartbeat deadlines, rounded up to a multiple of
// a grain of 1/64 of the interval (at most clockSlack, the lateness the
// clock allows anyway): the deadlines of links with the same interval
// then fall on the same instants and run in one wake-up of the reactor,
// however many links there are (64 a second at most for 1 s heartbeats).
func (l *link) beatAt(t *timed, when time.Time) {
	period := l.hb.every
	if period == 0 {
		period = l.hb.timeout
	}
	l.eng.clock.at(t, beatGrainUp(when, period))
}

// beatGrainUp rounds when up to a multiple of period/64 (at most
// clockSlack) since beatEpoch.
func beatGrainUp(when time.Time, period time.Duration) time.Time {
	g := min(period/64, clockSlack)
	if g <= 0 {
		return when
	}
	off := when.Sub(beatEpoch)
	return beatEpoch.Add((off + g - 1) / g * g)
}

// beatEpoch is where the heartbeat grains start (with Go's monotonic
// reading, as the other deadlines have).
var beatEpoch = time.Now()

// beatSpread is up to d, at random: how much earlier than due a send check
// comes, so that links do not fall into step.
func beatSpread(d time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(d) + 1)) }

// watchBeat puts l's heartbeat deadlines on the clock, or moves its send
// check to l's (new, shorter) interval. On the reactor.
func (l *link) watchBeat() {
	hb := &l.hb
	now := time.Now()
	if !hb.watched {
		hb.watched = true
		hb.heardAt = now
		hb.sent, hb.sentAt, hb.checked = l.sentCount(), now, now
		if hb.timeout > 0 {
			l.beatAt(&hb.check, now.Add(hb.timeout))
		}
	}
	hb.due = now.Add(hb.every - beatSpread(hb.every/2))
	l.beatAt(&hb.send, hb.due)
}

// stopBeat takes l's heartbeat deadlines off the clock. On the reactor.
func (l *link) stopBeat() {
	hb := &l.hb
	if !hb.watched {
		return
	}
	hb.watched = false
	l.eng.clock.cancel(&hb.send)
	l.eng.clock.cancel(&hb.check)
}

// onBeatSend is l's send check: a heartbeat goes if l may have sent
// nothing for its interval (less what spreads the links).
func (l *link) onBeatSend(now time.Time) {
	l.eng.clock.background()
	hb := &l.hb
	if sent := l.sentCount(); sent != hb.sent {
		// It may have gone right after the last check: so no gap exceeds
		// the interval by more than the clock's lateness.
		hb.sent, hb.sentAt = sent, hb.checked
		hb.due = hb.sentAt.Add(hb.every - beatSpread(hb.every/8))
	}
	hb.checked = now
	if hb.pending || !now.Before(hb.due) {
		l.sendHeartbeat()
		if hb.pending {
			// No credit or slot: service sends it when one comes back;
			// look again in half an interval meanwhile.
			l.beatAt(&hb.send, now.Add(hb.every/2))
			return
		}
		hb.sent, hb.sentAt = l.sentCount(), now
		hb.due = now.Add(hb.every - beatSpread(hb.every/8))
	}
	l.beatAt(&hb.send, hb.due)
}

// onBeatCheck ends l if its peer has been silent for the timeout, and
// otherwise moves the check to the timeout after the last thing heard.
func (l *link) onBeatCheck(now time.Time) {
	l.eng.clock.background()
	hb := &l.hb
	if now.Sub(hb.check.At()) > hb.timeout/2 {
		// The clock ran this late: this process did not run (stopped, or
		// starved of CPU), which is no fault of the peer's.
		hb.heardAt = now
	}
	if now.Sub(hb.heardAt) >= hb.timeout {
		// What arrived while the reactor was busy elsewhere counts.
		l.pollCQ()
		if !hb.watched {
			return // pollCQ ended it
		}
		if _, rdm := l.res.port.(*rdmPeer); rdm && !hb.second && now.Sub(hb.heardAt) >= hb.timeout {
			// pollCQ reads nothing here: an RDM link's messages are the
			// endpoint's to read, in its Poll, which follows in this round
			// (a process resumed after a stop has them waiting).
			hb.second = true
			l.beatAt(&hb.check, now.Add(minBeatInterval))
			return
		}
		if now.Sub(hb.heardAt) >= hb.timeout {
			l.fail(peerTimeout(hb.timeout))
			return
		}
	}
	hb.second = false
	l.beatAt(&hb.check, hb.heardAt.Add(hb.timeout))
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
