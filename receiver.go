package netio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/netio-go/netio/internal/page"
	"github.com/netio-go/netio/internal/wire"
)

// receiver is a Conn's reading side. Its methods run in the reading
// goroutine, under mu (taken with lock, which closes NextMessage's
// lock-free path: fastread.go), except giveBack, which Message.Release
// calls from anywhere, and that lock-free path. The reactor hands it checked buffers in order (recvQueue); it
// decodes their messages with a page.Reader and hands each
// buffer back once nothing refers to it any more.
type receiver struct {
	half
	q      *recvQueue
	frames page.Reader // set once at connect
	spares sparePool

	mu     sync.Mutex
	slot   int         // receive buffer being read; -1 if none
	pos    page.Cursor // position in the messages of slot
	lent   int32       // Messages handed out from slot on this visit
	gen    uint32      // slot's generation, once Messages are lent (lending, message.go)
	msgs   uint64      // messages read
	bytes  uint64      // their bytes
	failed error       // what the peer sent did not decode
	joined []byte      // the last message Next had to join; reused
	fast   fastRead

	deadline atomic.Int64 // Unix ns; 0 is none
}

// read is Read: the messages as one stream of bytes.
func (c *Conn) read(p []byte) (int, error) {
	if !c.ok() {
		return 0, zeroError("read")
	}
	r := &c.recv
	r.lock()
	defer r.mu.Unlock()
	if err := r.readable(); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n := 0
		for n < len(p) {
			ok, err := r.position()
			if err != nil {
				if n > 0 {
					return n, nil
				}
				return 0, r.side.opError("read", err)
			}
			if !ok {
				break
			}
			k := copy(p[n:], r.pos.Chunk())
			r.consume(k)
			n += k
		}
		if n > 0 {
			return n, nil
		}
		if err := r.waitReadable(context.Background()); err != nil {
			return 0, err
		}
	}
}

// atMessage takes the read lock and waits for a message, or until ctx
// ends; on an error it has let the lock go again.
func (r *receiver) atMessage(ctx context.Context) error {
	r.lock()
	err := r.readable()
	if err == nil {
		err = r.waitMessage(ctx)
	}
	if err != nil {
		r.mu.Unlock()
	}
	return err
}

// readMessage is ReadMessage, bounded by ctx unless it is nil.
func (r *receiver) readMessage(ctx context.Context, p []byte) (int, error) {
	if err := r.atMessage(ctx); err != nil {
		return 0, err
	}
	defer r.mu.Unlock()
	if r.pos.Left > uint64(len(p)) {
		return 0, r.side.opError("read", io.ErrShortBuffer)
	}
	return r.readRest(ctx, p)
}

func (r *receiver) appendMessage(dst []byte) ([]byte, error) {
	if err := r.atMessage(context.Background()); err != nil {
		return dst, err
	}
	defer r.mu.Unlock()
	if need := r.room(); cap(dst)-len(dst) < need {
		grown := make([]byte, len(dst), len(dst)+need)
		copy(grown, dst)
		dst = grown
	}
	return r.readAppend(context.Background(), dst)
}

func (r *receiver) messageLen() (int, error) {
	if err := r.atMessage(context.Background()); err != nil {
		return 0, err
	}
	defer r.mu.Unlock()
	return int(r.pos.Left), nil
}

// nextMessage is NextMessage and NextMessageContext, bounded by ctx. It
// is c's, not its receiver's, so that it rather than the exported method
// turns away a zero or nil Conn: with that check NextMessage was no longer
// inlined, and its extra frame copied the 80-byte result once more, a
// store-forwarding stall (docs/decisions/2026-11-27-next-message-inlined.md).
//
// Its common case, the next message lying whole in the page the reader
// stands in with no deadline or Close to look at, takes no lock: one CAS
// claims it (fastRead). The Message is built in place, not returned by a
// helper: through a helper returning (Message, bool) the 80-byte Message
// was copied twice more, and the copies stalled on store forwarding
// (docs/decisions/2026-11-next-message-in-place.md).
func (c *Conn) nextMessage(ctx context.Context) (Message, error) {
	if !c.ok() {
		return Message{}, zeroError("read")
	}
	r := &c.recv
	f := &r.fast
	for r.deadline.Load() == 0 && !r.closed.Load() {
		s := f.state.Load()
		if s&fastOpen == 0 {
			break
		}
		v := f.views[(s>>f.epochShift)&1].Load()
		slot, end := int(v>>32), int(uint32(v))
		base := slot*r.q.bufSize + wire.HeaderSize
		buf := r.q.mem[base : base+end]
		off := int(s & f.offMask)
		start, stop, ok := page.Record(buf, off, page.PrefixSize, f.max)
		if !ok {
			break
		}
		if !f.state.CompareAndSwap(s, s-uint64(off)+uint64(stop)+1<<f.idxShift) {
			continue // another reader took it
		}
		gen, idx := r.q.lending.gens[slot].Load(), uint32((s>>f.idxShift)&f.idxMask)
		if stop == len(buf) {
			r.leaveRead(slot)
		}
		return Message{own: unsafe.Pointer(r), b: buf[start:stop:stop], slot: int32(slot), gen: gen, idx: idx}, nil
	}
	r.lock()
	if r.slot >= 0 && r.deadline.Load() == 0 && !r.closed.Load() && r.q.lending.started() {
		if b, ok := r.frames.Record(&r.pos); ok {
			r.bytes += uint64(len(b))
			r.msgs++
			m := Message{own: unsafe.Pointer(r), b: b, slot: int32(r.slot), gen: r.gen, idx: uint32(r.lent)}
			r.lent++
			if r.pos.Off == len(r.pos.Buf) {
				r.leaveBuffer()
			}
			r.unlockOpen()
			return m, nil
		}
	}
	m, err := r.nextMessageSlow(ctx)
	r.unlockOpen()
	return m, err
}

// leaveRead is the fast path's reader having taken the last message of
// the page in slot: it leaves the page at once, as the locked path does,
// so that the buffer goes back as soon as its messages are released, not
// at the next read. It must not wait for the lock: the caller holds that
// last message, and the holder may be parked until a buffer comes back.
// A holder that took the lock after the claim leaves the page itself as
// it looks for the next message; one that took it before has opened the
// fast path on its way out, and the next read leaves the page.
func (r *receiver) leaveRead(slot int) {
	if !r.mu.TryLock() {
		return
	}
	if r.fast.state.Load()&fastOpen != 0 {
		r.absorb()
	}
	if r.slot == slot && r.pos.Off == len(r.pos.Buf) && !r.pos.InMsg {
		r.leaveBuffer()
	}
	r.mu.Unlock()
}

// nextMessageSlow is nextMessage after its common case, under mu.
func (r *receiver) nextMessageSlow(ctx context.Context) (Message, error) {
	if err := r.readable(); err != nil {
		return Message{}, err
	}
	if err := r.waitMessage(ctx); err != nil {
		return Message{}, err
	}
	if !r.q.lending.started() {
		per := messagesPerBuffer(r.q.bufSize)
		r.q.lending.start(len(r.q.refs), per)
		r.gen = r.q.lending.gen(r.slot) // waitMessage left the reader in a buffer
		r.q.held.Store(true)
		if r.frames.Prefix() == page.PrefixSize {
			r.fast.setup(r.q.bufSize, per, r.pos.Max)
		}
	}
	if ch := r.pos.Chunk(); uint64(len(ch)) == r.pos.Left {
		m := r.lend(ch)
		r.consume(len(ch))
		return m, nil
	}
	// Room for what the connection's buffers hold at most, grown as the
	// bytes arrive: the length the peer announced sizes nothing.
	sp := r.spares.get(r.room())
	sp.r = r
	buf, err := r.readAppend(ctx, sp.b[:0])
	if err != nil {
		r.spares.put(sp)
		return Message{}, err
	}
	sp.b = buf
	return Message{own: unsafe.Pointer(sp), b: buf[:len(buf):len(buf)], slot: slotSpare, gen: sp.gen.Load()}, nil
}

// lend hands out b, a message in the buffer the reader is at.
func (r *receiver) lend(b []byte) Message {
	n := r.lent
	r.lent++
	return Message{own: unsafe.Pointer(r), b: b, slot: int32(r.slot), gen: r.gen, idx: uint32(n)}
}

// next is Next. Its common case, as nextMessage's, is written out here.
func (c *Conn) next() ([]byte, error) {
	if !c.ok() {
		return nil, zeroError("read")
	}
	r := &c.recv
	r.lock()
	if r.slot >= 0 && r.deadline.Load() == 0 && !r.closed.Load() {
		if b, ok := r.frames.Record(&r.pos); ok {
			r.bytes += uint64(len(b))
			r.msgs++
			r.mu.Unlock()
			return b, nil
		}
	}
	b, err := r.nextLocked()
	r.mu.Unlock()
	return b, err
}

func (c *Conn) nextBatch(dst [][]byte) (int, error) {
	if !c.ok() {
		return 0, zeroError("read")
	}
	r := &c.recv
	if len(dst) == 0 {
		return 0, nil
	}
	r.lock()
	defer r.mu.Unlock()
	b, err := r.nextLocked()
	if err != nil {
		return 0, err
	}
	ok := true
	dst[0] = b
	n := 1
	if r.frames.Prefix() == page.PrefixSize && r.slot >= 0 {
		// The rest of the page in one loop, counted once (page.Reader.Records).
		k, bytes := r.frames.Records(&r.pos, dst[1:])
		r.msgs += uint64(k)
		r.bytes += bytes
		return 1 + k, nil
	}
	for ; n < len(dst); n++ {
		if dst[n], ok = r.another(); !ok {
			break
		}
	}
	return n, nil
}

// record is a tagged message a subscriber read: b is valid until the next
// read.
type record struct {
	tag, seq uint64
	b        []byte
}

// nextRecords is nextBatch for tagged pages, with each message's tag and
// sequence number.
func (r *receiver) nextRecords(dst []record) (int, error) {
	r.lock()
	defer r.mu.Unlock()
	b, err := r.nextLocked()
	if err != nil {
		return 0, err
	}
	dst[0] = record{tag: r.pos.Tag, seq: r.pos.Seq, b: b}
	n := 1
	for ; n < len(dst); n++ {
		b, ok := r.another()
		if !ok {
			break
		}
		dst[n] = record{tag: r.pos.Tag, seq: r.pos.Seq, b: b}
	}
	return n, nil
}

// another is the next message of the buffer at hand when it lies whole in
// it: the batch reads' fast path.
func (r *receiver) another() ([]byte, bool) {
	if r.slot < 0 {
		return nil, false
	}
	b, ok := r.frames.Record(&r.pos)
	if ok {
		r.bytes += uint64(len(b))
		r.msgs++
	}
	return b, ok
}

func (r *receiver) nextLocked() ([]byte, error) {
	if r.slot >= 0 && r.deadline.Load() == 0 && !r.closed.Load() {
		if b, ok := r.frames.Record(&r.pos); ok {
			r.bytes += uint64(len(b))
			r.msgs++
			return b, nil
		}
	}
	if err := r.readable(); err != nil {
		return nil, err
	}
	if err := r.waitMessage(context.Background()); err != nil {
		return nil, err
	}
	if ch := r.pos.Chunk(); uint64(len(ch)) == r.pos.Left {
		// The buffer stays the reader's until its next read.
		r.pos.Consume(len(ch))
		r.bytes += uint64(len(ch))
		r.msgs++
		return ch, nil
	}
	buf := r.joined[:0]
	if need := r.room(); cap(buf) < need {
		buf = make([]byte, 0, need)
	}
	buf, err := r.readAppend(context.Background(), buf)
	if err != nil {
		return nil, err
	}
	if cap(buf) <= r.spares.limit {
		r.joined = buf // kept for the next one; larger ones are not
	}
	return buf[:len(buf):len(buf)], nil
}

// waitMessage waits until the first bytes of a message (or the rest of a
// partly read one) are at hand, or until ctx ends.
func (r *receiver) waitMessage(ctx context.Context) error {
	for {
		ok, err := r.position()
		if err != nil {
			return r.side.opError("read", err)
		}
		if ok {
			return nil
		}
		if err := r.waitReadable(ctx); err != nil {
			return err
		}
	}
}

// readRest copies the rest of the current message into p, which is large
// enough, waiting for its later buffers, bounded by ctx unless it is nil.
func (r *receiver) readRest(ctx context.Context, p []byte) (int, error) {
	n := 0
	for {
		k := copy(p[n:], r.pos.Chunk())
		r.consume(k)
		n += k
		if !r.pos.InMsg {
			return n, nil
		}
		// The rest of the message is still coming. On an error, what was
		// consumed stays consumed: the next call returns the rest.
		if err := r.waitMessage(ctx); err != nil {
			return n, err
		}
	}
}

// room is how much room a read makes at once for the rest of the current
// message: all of it, unless that is more than the connection's receive
// buffers hold. The length of a message is the peer's word, and a header
// that announces MaxMessageSize over ten bytes of a page must not cost
// MaxMessageSize (with MaxMessageSize at 1 TiB, that was the process):
// the receive buffers are memory the connection commits to the peer
// anyway, and a larger message makes its room as it arrives (readAppend).
func (r *receiver) room() int { return int(min(r.pos.Left, uint64(len(r.q.mem)))) }

// readAppend appends the rest of the current message to dst as its bytes
// arrive, bounded by ctx unless it is nil. Room beyond dst's capacity
// doubles, up to what the message still needs, so that a message larger
// than room() is copied at most about once more than into room of its
// full size. On an error, what was consumed stays consumed and is in the
// returned slice.
func (r *receiver) readAppend(ctx context.Context, dst []byte) ([]byte, error) {
	for {
		ch := r.pos.Chunk()
		if cap(dst)-len(dst) < len(ch) {
			need := uint64(len(dst)) + r.pos.Left
			grown := make([]byte, len(dst), int(min(need, uint64(max(2*cap(dst), len(dst)+len(ch))))))
			copy(grown, dst)
			dst = grown
		}
		dst = append(dst, ch...)
		r.consume(len(ch))
		if !r.pos.InMsg {
			return dst, nil
		}
		if err := r.waitMessage(ctx); err != nil {
			return dst, err
		}
	}
}

// consume moves past k bytes of the current message, handing the buffer
// back as soon as the reader is done with it, so that the peer gets its
// credit without waiting for the next read.
func (r *receiver) consume(k int) {
	r.pos.Consume(k)
	r.bytes += uint64(k)
	if !r.pos.InMsg {
		r.msgs++
	}
	if r.pos.Off == len(r.pos.Buf) && !r.pos.Ready() && !r.pos.More() {
		r.leaveBuffer()
	}
}

// position makes the reader stand at bytes of a message, or at an empty
// message, entering the next buffer when the current one is done. It
// reports false when that buffer has not arrived yet.
func (r *receiver) position() (bool, error) {
	if r.failed != nil {
		return false, r.failed
	}
	for {
		if r.slot >= 0 {
			if r.pos.Ready() {
				return true, nil
			}
			if r.pos.More() {
				if err := r.frames.Begin(&r.pos); err != nil {
					return false, r.readFailed(err)
				}
				continue
			}
			r.leaveBuffer()
		}
		slot, ok := r.q.ready.Peek()
		if !ok {
			return false, nil
		}
		payload, h := r.q.payload(slot)
		r.slot = int(slot)
		if r.q.lending.started() {
			r.gen = r.q.lending.gen(r.slot)
		}
		if err := r.frames.Enter(&r.pos, payload, h); err != nil {
			return false, r.readFailed(err)
		}
	}
}

// readFailed ends the connection because what the peer sent does not
// decode; the reactor closes it, and every later read returns err.
func (r *receiver) readFailed(err error) error {
	r.failed = err
	r.pos.Drop()
	r.l.failLater(err)
	return err
}

// leaveBuffer is the reader done with its current buffer: it goes back to
// the reactor unless Messages handed out from it still use it.
func (r *receiver) leaveBuffer() {
	slot := uint32(r.slot)
	r.q.ready.Pop()
	r.slot = -1
	r.pos.Leave()
	r.stats.messagesReceived.Store(r.msgs)
	r.stats.bytesReceived.Store(r.bytes)
	h := r.q.lending.left(slot, r.lent)
	r.lent = 0
	if h != 0 && r.q.refs[slot].Add(h) != 0 {
		return // the last Release frees it
	}
	r.giveBack(slot)
}

// giveBack hands a receive buffer back to the reactor. The reader and
// Message.Release both call it.
func (r *receiver) giveBack(slot uint32) {
	r.q.lending.recycle(slot)
	if r.q.giveBack(slot) {
		r.l.kick()
	}
}

// readable checks, before a read, for Close, a passed deadline and a
// connection whose messages go to OnMessage.
func (r *receiver) readable() error {
	if r.closed.Load() {
		return r.side.opError("read", net.ErrClosed)
	}
	if expired(&r.deadline) {
		return r.side.opError("read", os.ErrDeadlineExceeded)
	}
	if r.l.onMessage != nil {
		return r.side.opError("read", errOnMessage)
	}
	return nil
}

// arrived reports whether a buffer the reader does not hold yet is ready.
func (r *receiver) arrived() bool {
	n := r.q.ready.Len()
	if r.slot >= 0 {
		n--
	}
	return n > 0
}

var errOnMessage = errors.New("netio: messages go to Config.OnMessage")

// errCutShort is a stream that ended inside a message.
var errCutShort = fmt.Errorf("%w: connection ended inside a message", io.ErrUnexpectedEOF)

// waitReadable blocks until a buffer arrives, the connection ends, Close
// is called, the read deadline passes or ctx ends. A nil ctx is none: the
// plain reads pass nil, and so do the Context ones for a ctx that cannot
// end (Done() == nil), which then cost nothing more.
func (r *receiver) waitReadable(ctx context.Context) error {
	c, q, life := r.side, r.q, &r.l.life
	if pollReady(r.pollFor, r.l, r.closed, r.arrived) {
		return nil
	}
	q.waiting.Store(true)
	if r.arrived() {
		c.stopWaiting(&q.waiting)
		return nil
	}
	if life.Ended() {
		c.stopWaiting(&q.waiting)
		if r.arrived() {
			return nil
		}
		if r.failed != nil {
			return c.opError("read", r.failed)
		}
		if errors.Is(life.Err(), io.EOF) {
			if r.pos.InMsg {
				return c.opError("read", errCutShort)
			}
			return io.EOF
		}
		return c.opError("read", life.Err())
	}
	if r.closed.Load() {
		c.stopWaiting(&q.waiting)
		return c.opError("read", net.ErrClosed)
	}
	if q.fin.Load() {
		// The peer closed its writing side (or is closing): nothing
		// follows what has arrived, and the link may stay open for our
		// writes.
		c.stopWaiting(&q.waiting)
		switch {
		case r.arrived():
			return nil
		case r.failed != nil:
			return c.opError("read", r.failed)
		case r.pos.InMsg:
			return c.opError("read", errCutShort)
		}
		return io.EOF
	}
	if ctx.Done() != nil {
		if err := ctx.Err(); err != nil {
			c.stopWaiting(&q.waiting)
			return c.opError("read", err)
		}
		// The end of ctx wakes the parked reader, as a deadline does. A
		// wake that comes after it has left makes a later wait return
		// early, and its caller looks again.
		stop := context.AfterFunc(ctx, q.wake.Ring)
		defer stop()
	}
	r.l.eng.parks.Add(1)
	err := q.wake.Wait()
	c.stopWaiting(&q.waiting)
	if ctx.Err() != nil && !r.closed.Load() && !r.arrived() {
		return c.opError("read", ctx.Err())
	}
	if err != nil {
		if r.closed.Load() {
			return c.opError("read", net.ErrClosed)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && !r.arrived() {
			return c.opError("read", os.ErrDeadlineExceeded)
		}
	}
	return nil // the caller looks again
}
