package netio

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/netio-go/netio/internal/page"
	"github.com/netio-go/netio/internal/sendgate"
	"github.com/netio-go/netio/internal/wire"
)

// sender is a Conn's writing side. Its methods run in the writing
// goroutine, inside the send gate: Write and its kin, Flush, and Close's
// last flush. The reactor enters the gate only to seal a page that waited
// too long (pageWatch), or on a LowLatency connection the buffer that
// packed the messages queued behind sends in flight (packing). It fills
// send buffers in order and publishes each by advancing the send queue's
// head; the reactor does the rest.
type sender struct {
	half
	q      *sendQueue
	gate   sendgate.Gate
	frames *page.Writer // set once at connect
	lazy   bool         // frames wait to fill: a pageWatch flushes them
	watch  *pageWatch   // nil unless lazy
	pack   bool         // frames are packed: see packing
	packing

	open    bool          // a buffer is being filled: the one at q.head
	opened  atomic.Uint64 // buffers opened, for the pageWatch to notice
	failed  error         // a write that stopped half-way: the stream cannot go on
	shut    bool          // CloseWrite: writes fail with EPIPE
	msgs    uint64        // messages written
	bytes   uint64        // their bytes
	maxSend int           // set once at connect
	lend    bool          // large messages go from the caller's memory (send_from_slice.go); set at connect
	// appendMax is the largest message the fast paths append: maxSend,
	// or below lendMin when large ones are lent. Set at connect.
	appendMax int
	tail      []byte // what of the buffer being sealed lies in the caller's memory
	pin       runtime.Pinner

	deadline atomic.Int64 // Unix ns; 0 is none
}

// Causes of a buffer being sealed. Stats count them for lazy framings,
// whose buffers wait; the others seal every buffer as soon as it is
// written.
type flushCause uint8

const (
	flushFull flushCause = iota
	flushTimer
	flushExplicit
	flushIdle
	flushCauses
)

// write is Write: a message that fits the open buffer is appended without
// looking at anything else.
//
// Both framings are pages: through the assertion appendWhole is a direct
// call, not an interface one.
func (c *Conn) write(p []byte) (int, error) {
	if !c.ok() {
		return 0, zeroError("write")
	}
	s := &c.send
	if s.gate.Lock() && s.open && len(p) <= s.appendMax && s.frames.AppendWhole(p) {
		s.msgs++
		s.bytes += uint64(len(p))
		s.gate.Unlock()
		if s.pack && s.want.Load() {
			s.sealWanted()
		}
		return len(p), nil
	}
	n, err := s.writeLocked(context.Background(), p, false)
	s.unlock()
	return n, err
}

// unhindered reports whether nothing stands in a write's way: no deadline
// to look at, no Close, no end, no earlier failure, no size limit hit.
// The publisher asks it; a Conn's writers know it from the gate's flags.
func (s *sender) unhindered(n int) bool {
	return s.deadline.Load() == 0 && !s.closed.Load() && !s.l.life.Ended() && s.failed == nil && n <= s.maxSend
}

func (c *Conn) writeBatch(msgs [][]byte) (int, error) {
	if !c.ok() {
		return 0, zeroError("write")
	}
	s := &c.send
	clear := s.gate.Lock()
	defer s.unlock()
	w := s.frames
	for i := 0; i < len(msgs); i++ {
		if clear && s.open {
			n, bytes := w.AppendAll(msgs[i:], s.appendMax)
			s.msgs += uint64(n)
			s.bytes += bytes
			if i += n; i == len(msgs) {
				break
			}
		}
		if _, err := s.writeLocked(context.Background(), msgs[i], false); err != nil {
			return i, err
		}
	}
	return len(msgs), nil
}

// writeWaiting is a write that waits for the gate, or gives up at once if
// try.
func (s *sender) writeWaiting(ctx context.Context, p []byte, try bool) (int, error) {
	if !try {
		s.gate.Lock()
	} else if !s.gate.TryLock() {
		return 0, s.side.opError("write", ErrWouldBlock)
	}
	defer s.unlock()
	return s.writeLocked(ctx, p, try)
}

func (s *sender) writeLocked(ctx context.Context, p []byte, try bool) (int, error) {
	if err := s.writable(len(p)); err != nil {
		return 0, err
	}
	if try && !s.fits(len(p)) {
		return 0, s.side.opError("write", ErrWouldBlock)
	}
	if !try && s.lends(len(p)) {
		return s.writeLent(ctx, p)
	}
	return s.writeMessage(ctx, p)
}

// writeMessage lays p into send buffers, opening and sealing them as the
// framing says; only a message larger than a buffer spans several.
func (s *sender) writeMessage(ctx context.Context, p []byte) (int, error) {
	fw, n := s.frames, len(p)
	if s.open && !fw.Begin(n) {
		s.publish(flushFull)
	}
	if !s.open {
		if err := s.openNext(ctx, 0); err != nil {
			return 0, err
		}
		fw.Begin(n) // a fresh buffer takes any message's start
	}
	off := fw.Put(p)
	for off < n {
		s.publish(flushFull)
		if err := s.openNext(ctx, uint64(min(n-off, s.q.bufSize-wire.HeaderSize))); err != nil {
			// Part of the message is on its way: the stream cannot go on.
			s.failed = err
			s.gate.Stop()
			return off, err
		}
		off += fw.Put(p[off:])
	}
	s.msgs++
	s.bytes += uint64(n)
	switch {
	case fw.Full():
		s.publish(flushFull)
	case s.pack:
		s.settle()
	}
	return n, nil
}

// openNext starts the next send buffer, waiting for one to be free; cont
// bytes at its start continue the previous buffer's message.
func (s *sender) openNext(ctx context.Context, cont uint64) error {
	head := s.q.head.Load()
	if s.q.full(head) {
		if err := s.waitWritable(ctx, head); err != nil {
			return err
		}
	}
	s.frames.Open(s.q.buf(head), cont)
	s.open = true
	if s.lazy {
		s.opened.Add(1)
		s.watch.notify() // arms the flush timer and the pause watch
	}
	return nil
}

// seal ends the open buffer and publishes it to the reactor. Inside the
// gate: by the writer, or by the reactor for a page that waited.
func (s *sender) seal(cause flushCause) {
	head := s.q.head.Load()
	slot := head % uint64(s.q.slots)
	s.q.lens[slot] = uint32(s.frames.Seal())
	if s.tail != nil {
		s.q.tails[slot], s.tail = s.tail, nil
		s.q.lent[slot].Store(lentWaiting)
	}
	s.open = false
	if s.pack {
		s.sealed()
	}
	st := s.stats
	if s.lazy {
		st.flushes[cause].Add(1)
	}
	st.messagesSent.Store(s.msgs)
	st.bytesSent.Store(s.bytes)
	s.q.head.Store(head + 1)
}

// publish is the writer sealing: the reactor is told.
func (s *sender) publish(cause flushCause) {
	s.seal(cause)
	s.l.kick()
}

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

// pageWatch sends the pages a writer leaves open: after FlushInterval at
// the latest, and as soon as the writer pauses (unless NoIdleFlush). It is
// the reactor's side of a lazy framing; it seals a page only when it gets
// the send gate with one CAS (a writer inside is busy, not paused, and is
// looked at again later), so it never waits for a user's goroutine.
//
// Where each page's send comes from: the writer seals it when it is full
// or on Flush and Close (sender), the flush timer when it has waited
// FlushInterval (onTimer), the idle look when its writer wrote nothing
// between two looks (checkIdle). All of them call sender.seal.
type pageWatch struct {
	s        *sender
	l        *link
	interval time.Duration
	noIdle   bool

	scheduled atomic.Bool // notify queued a look on the reactor

	// Reactor only.
	flush      timed     // the flush deadline, on the engine's clock
	seenOpened uint64    // sender.opened at the last look
	since      time.Time // when the open page was first seen
	watched    bool      // in the engine's idle list
	seenMsgs   uint64    // sender.msgs at the last idle look
}

// flushRetry is how soon the flush timer looks again when a writer is
// inside the gate (copying a large message, or waiting for a buffer).
const flushRetry = 10 * time.Millisecond

// newPageWatch makes the watch of s; on the reactor.
func newPageWatch(s *sender, l *link, cfg *Config) *pageWatch {
	w := &pageWatch{s: s, l: l, interval: cfg.FlushInterval, noIdle: cfg.NoIdleFlush}
	w.flush.Value = w.onTimer
	return w
}

// notify tells the reactor that the writer opened a page. Any goroutine;
// one task queued at a time.
func (w *pageWatch) notify() {
	if !w.scheduled.Load() && w.scheduled.CompareAndSwap(false, true) {
		if w.l.eng.r.Submit(w) != nil {
			w.scheduled.Store(false)
		}
	}
}

// Run notices a page opened since the last look: it arms the flush timer
// and the pause watch. On the reactor.
func (w *pageWatch) Run() {
	w.scheduled.Store(false)
	if !w.l.flowing() {
		return
	}
	opened := w.s.opened.Load()
	if opened == w.seenOpened {
		return
	}
	w.seenOpened = opened
	w.since = time.Now()
	if !w.flush.Queued() {
		w.l.eng.clock.at(&w.flush, w.since.Add(w.interval))
	}
	if !w.noIdle {
		w.l.eng.watchIdle(w)
	}
}

// onTimer sends a page that has waited FlushInterval.
func (w *pageWatch) onTimer(now time.Time) {
	if !w.l.flowing() {
		return
	}
	if !w.s.gate.TryReactor() {
		w.l.eng.clock.at(&w.flush, now.Add(min(flushRetry, w.interval)))
		return
	}
	sealed := false
	if w.s.open {
		if opened := w.s.opened.Load(); opened != w.seenOpened {
			w.seenOpened, w.since = opened, now
		}
		if now.Sub(w.since) >= w.interval {
			w.s.seal(flushTimer)
			sealed = true
		} else {
			w.l.eng.clock.at(&w.flush, w.since.Add(w.interval))
		}
	}
	w.s.gate.Unlock()
	if sealed {
		w.l.service()
	}
}

// checkIdle seals the open page when its writer has written nothing into
// it since the last look: the writer paused, and waiting longer would only
// delay what it wrote. It reports whether to stop watching (no page is
// open any more) and whether it sealed; after a seal the link sends.
func (w *pageWatch) checkIdle() (done, sealed bool) {
	if !w.l.flowing() {
		return true, false
	}
	if !w.s.gate.TryReactor() {
		return false, false // a writer is inside: not a pause
	}
	switch {
	case !w.s.open:
		done = true
	case w.s.msgs != w.seenMsgs:
		w.seenMsgs = w.s.msgs
	default:
		w.s.seal(flushIdle)
		done, sealed = true, true
	}
	w.s.gate.Unlock()
	if sealed {
		w.l.service()
	}
	return done, sealed
}

// startIdle is the engine starting to watch w.
func (w *pageWatch) startIdle() bool {
	if w.watched {
		return false
	}
	w.watched, w.seenMsgs = true, ^uint64(0)
	return true
}

// stopIdle is the engine no longer watching w.
func (w *pageWatch) stopIdle() { w.watched = false }

// close takes the watch off the engine; on the reactor, when the link is
// released.
func (w *pageWatch) close() {
	w.l.eng.forgetIdle(w)
	w.l.eng.clock.cancel(&w.flush)
}

// delivered is how many messages have been handed to the reactor. Any
// goroutine.
func (s *sender) delivered() uint64 { return s.stats.messagesSent.Load() }

// flush sends the open buffer now.
func (s *sender) flush() error {
	s.gate.Lock()
	defer s.unlock()
	if err := s.writable(0); err != nil {
		return err
	}
	if s.open {
		s.publish(flushExplicit)
	}
	return nil
}

// sealForClose seals what was written, for Close to send it.
func (s *sender) sealForClose() {
	s.gate.Lock()
	if s.open {
		s.seal(flushExplicit)
	}
	s.unlock()
}

// shutWrite seals what was written and makes every later write fail, for
// CloseWrite; it reports false if it was done already.
func (s *sender) shutWrite() bool {
	s.gate.Lock()
	defer s.unlock()
	if s.shut {
		return false
	}
	if s.open {
		s.seal(flushExplicit)
	}
	s.shut = true
	s.gate.Stop()
	return true
}

// writable checks, before a write of n bytes, for Close, CloseWrite, the
// deadline, a dead connection, an earlier failure and the size limit.
func (s *sender) writable(n int) error {
	switch {
	case s.closed.Load():
		return s.side.opError("write", net.ErrClosed)
	case s.shut:
		// As a socket after shutdown(SHUT_WR), and *net.TCPConn.
		return s.side.opError("write", syscall.EPIPE)
	case expired(&s.deadline):
		return s.side.opError("write", os.ErrDeadlineExceeded)
	case s.l.life.Ended():
		return s.deadErr()
	case s.failed != nil:
		return s.failed
	case n > s.maxSend:
		return s.side.opError("write", ErrMessageTooLarge)
	}
	return nil
}

// fits reports whether n bytes can be written without waiting.
func (s *sender) fits(n int) bool {
	free := s.q.free()
	if s.open {
		free-- // the open buffer is not published yet
	}
	return free >= s.frames.Buffers(n, s.open)
}

// waitWritable waits until fewer than all send buffers are in flight, for
// the write deadline, Close, the end of the connection and ctx.
func (s *sender) waitWritable(ctx context.Context, head uint64) error {
	q, c := s.q, s.side
	start := time.Now()
	defer func() { s.stats.creditWait.Add(int64(time.Since(start))) }()
	if pollReady(s.pollFor, s.l, s.closed, func() bool { return !q.full(head) }) {
		return nil
	}
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, q.wake.Ring)
		defer stop()
	}
	for {
		q.waiting.Store(true)
		if !q.full(head) {
			c.stopWaiting(&q.waiting)
			return nil
		}
		switch {
		case s.closed.Load():
			c.stopWaiting(&q.waiting)
			return c.opError("write", net.ErrClosed)
		case s.l.life.Ended():
			c.stopWaiting(&q.waiting)
			return s.deadErr()
		case ctx.Err() != nil:
			c.stopWaiting(&q.waiting)
			return c.opError("write", ctx.Err())
		case s.l.eng.r.OnReactor():
			// Waiting here would stop the reactor that frees the space.
			c.stopWaiting(&q.waiting)
			return c.opError("write", ErrWouldBlock)
		}
		err := q.wake.Wait()
		c.stopWaiting(&q.waiting)
		if errors.Is(err, os.ErrDeadlineExceeded) && q.full(head) {
			return c.opError("write", os.ErrDeadlineExceeded)
		}
	}
}

// deadErr is what a write to an ended connection returns: the peer's
// orderly close reads as a broken pipe, as for a socket.
func (s *sender) deadErr() error {
	err := s.l.life.Err()
	if errors.Is(err, io.EOF) {
		err = syscall.EPIPE
	}
	return s.side.opError("write", err)
}
