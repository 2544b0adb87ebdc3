package netio

import "sync/atomic"

// Packing is how a LowLatency connection batches by itself, the way
// ZeroMQ does, without a flush timer. Its buffers are pages of
// length-prefixed records (internal/page), sealed by this rule:
//
//   - A message written while every buffer sealed before it has completed
//     (the link is idle) is sealed and sent at once: a lone message waits
//     for nothing.
//   - A message written while sends are in flight, or sealed and not yet
//     posted, is left in the open buffer, and the reactor is kicked. The
//     messages written after it join it, until the reactor is about to
//     post the buffer (nothing sealed waits and a credit is free): then it
//     seals it (sealOpen) and posts everything queued as one fabric send.
//
// So each fi_send carries what was written while the previous one was
// going out, and a stream of small messages costs a send per batch rather
// than per message (docs/decisions/2026-11-23-packing.md).
//
// The reactor never waits for a writer: it enters the send gate with one
// CAS, and when a writer is inside it leaves want set instead, which the
// writer looks at on its way out (sender.unlock) and seals for it. Either
// the reactor's CAS sees the gate free or the writer sees want: the
// reactor stores want before its CAS, the writer frees the gate before it
// loads want, and atomics are sequentially consistent.
type packing struct {
	pending atomic.Bool // a buffer is left open for the reactor to seal
	want    atomic.Bool // the reactor found the gate taken: the writer seals
}

// openSealer is a sender with packed buffers as its link sees it.
type openSealer interface {
	// sealOpen seals the buffer left open for the reactor, if any. On the
	// reactor, when it is about to post.
	sealOpen()
}

// settle is the packing rule for a message that ended in the open buffer,
// which has room left. Inside the gate.
func (s *sender) settle() {
	if s.q.done.Load() == s.q.head.Load() {
		s.publish(flushFull) // idle: at once
		return
	}
	s.pending.Store(true)
	s.l.kick()
}

// sealed is the open buffer sealed: whatever was pending or wanted is
// done. Inside the gate.
func (s *sender) sealed() {
	s.pending.Store(false)
	s.want.Store(false)
}

// unlock lets the gate go, and seals the open buffer if the reactor asked
// for it while the writer was inside.
// Write's fast path spells it out, as a call to unlock does not inline.
func (s *sender) unlock() {
	s.gate.Unlock()
	if s.pack && s.want.Load() {
		s.sealWanted()
	}
}

// sealWanted seals the open buffer for the reactor if it asked, unless
// someone else took the gate in between: a writer sees want on its own way
// out, the reactor seals.
func (s *sender) sealWanted() {
	for s.want.Load() && s.gate.TryLock() {
		if s.want.Load() && s.open {
			s.publish(flushFull)
		}
		s.want.Store(false)
		s.gate.Unlock()
	}
}

func (s *sender) sealOpen() {
	if !s.pending.Load() {
		return
	}
	s.want.Store(true)
	if !s.gate.TryReactor() {
		return // the writer inside seals on its way out
	}
	if s.open {
		s.seal(flushFull)
	}
	s.want.Store(false)
	s.gate.Unlock()
}
