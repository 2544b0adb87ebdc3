package netio

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
)

// The reading side of a Conn. The reactor hands received buffers over in
// order through rxReady; the reading goroutine decodes them (a page's
// records or a message's fragments) and hands them back through rxFree
// once nothing refers to them any more. Only the reader touches the fields
// used here, under rmu, except rxRefs and the spare buffers, which Message
// Release shares.

// Read reads bytes of the incoming messages as one stream: a message
// longer than p is returned across several Reads, and message boundaries
// are not marked. Use ReadMessage or NextMessage to keep them.
func (c *Conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if err := c.readable(); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n := 0
		for n < len(p) {
			ok, err := c.position()
			if err != nil {
				if n > 0 {
					return n, nil
				}
				return 0, c.opError("read", err)
			}
			if !ok {
				break
			}
			k := copy(p[n:], c.rc.chunk())
			c.consume(k)
			n += k
		}
		if n > 0 {
			return n, nil
		}
		if err := c.waitReadable(); err != nil {
			return 0, err
		}
	}
}

// ReadMessage reads one whole message into p and returns its length. A
// message longer than p is not consumed: ReadMessage returns
// io.ErrShortBuffer (wrapped) and MessageLen, AppendMessage or
// NextMessage can take it. If Read has consumed part of a message,
// ReadMessage returns the rest.
func (c *Conn) ReadMessage(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if err := c.readable(); err != nil {
		return 0, err
	}
	if err := c.waitMessage(); err != nil {
		return 0, err
	}
	if c.rc.left > uint64(len(p)) {
		return 0, c.opError("read", io.ErrShortBuffer)
	}
	return c.readRest(p)
}

// AppendMessage reads one whole message, appends it to dst and returns the
// extended slice. It allocates only when dst lacks the capacity.
func (c *Conn) AppendMessage(dst []byte) ([]byte, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if err := c.readable(); err != nil {
		return dst, err
	}
	if err := c.waitMessage(); err != nil {
		return dst, err
	}
	start := len(dst)
	if need := start + int(c.rc.left); need > cap(dst) {
		grown := make([]byte, start, need)
		copy(grown, dst)
		dst = grown
	}
	n, err := c.readRest(dst[start : start+int(c.rc.left)])
	return dst[:start+n], err
}

// MessageLen waits for the next message and returns its length (or what
// is left of it after a partial Read) without consuming it.
func (c *Conn) MessageLen() (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if err := c.readable(); err != nil {
		return 0, err
	}
	if err := c.waitMessage(); err != nil {
		return 0, err
	}
	return int(c.rc.left), nil
}

// Message is a received message read by NextMessage without a copy: its
// bytes are the receive buffer the fabric wrote them to. They stay valid
// until Release, also after later reads; the buffer goes back to the
// fabric (and becomes a credit for the peer) once every message in it is
// released. Holding messages therefore holds the peer back: a connection
// has Config.Window buffers, and a peer that has filled them all waits.
//
// Release must be called exactly once per message; a Message is a small
// value and may be copied, but not released twice.
type Message struct {
	c    *Conn
	b    []byte
	slot int32 // receive buffer holding b; -1 for a spare buffer
}

// Bytes returns the message, valid until Release. Appending to it
// allocates a copy: its capacity ends with the message.
func (m Message) Bytes() []byte { return m.b }

// Len returns the message's length.
func (m Message) Len() int { return len(m.b) }

// Release gives the message's memory back to the connection. It may be
// called from any goroutine, before or after the connection is closed. On
// the zero Message it does nothing.
func (m Message) Release() {
	switch {
	case m.c == nil:
	case m.slot >= 0:
		if m.c.rxRefs[m.slot].Add(-1) == 0 {
			m.c.freeBuffer(uint32(m.slot))
		}
	default:
		m.c.putSpare(m.b)
	}
}

// NextMessage waits for the next message and returns it without copying
// it out of the receive buffer. A message that arrived in several buffers
// (larger than a page, or than the peer's fragments) is joined in a spare
// buffer that Release recycles, so the steady state allocates nothing.
// If Read has consumed part of a message, NextMessage returns the rest.
func (c *Conn) NextMessage() (Message, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if m, ok := c.nextInPage(); ok {
		return m, nil
	}
	if err := c.readable(); err != nil {
		return Message{}, err
	}
	if err := c.waitMessage(); err != nil {
		return Message{}, err
	}
	if !c.zeroCopy.Load() {
		c.zeroCopy.Store(true)
	}
	if ch := c.rc.chunk(); uint64(len(ch)) == c.rc.left {
		m := Message{c: c, b: ch, slot: int32(c.cur)}
		c.handed++
		c.consume(len(ch))
		return m, nil
	}
	buf := c.spareBuffer(int(c.rc.left))
	n, err := c.readRest(buf)
	if err != nil {
		c.putSpare(buf)
		return Message{}, err
	}
	return Message{c: c, b: buf[:n:n], slot: -1}, nil
}

// Next returns the next message without copying it: the slice points into
// the receive buffer and is valid only until the next read on c (Read,
// ReadMessage, AppendMessage, MessageLen, Next or NextMessage) or Close.
// It is the cheapest way to read; use NextMessage to keep messages longer.
// A message that arrived in several buffers is joined in a buffer of c's
// own that the next such message reuses.
func (c *Conn) Next() ([]byte, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return c.next()
}

// NextBatch is Next for many messages at once: it waits for one message,
// then adds those that are already at hand, up to len(dst), and returns
// how many it stored in dst. They are valid until the next read on c.
// Taking the connection's read lock once per batch instead of once per
// message makes it the cheapest way to read small messages.
func (c *Conn) NextBatch(dst [][]byte) (int, error) {
	if len(dst) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	b, err := c.next()
	if err != nil {
		return 0, err
	}
	dst[0] = b
	n := 1
	for ; n < len(dst) && c.cur >= 0; n++ {
		b, ok := c.rc.record()
		if !ok {
			break
		}
		c.rxBytes += uint64(len(b))
		dst[n] = b
	}
	c.rxMsgs += uint64(n - 1)
	return n, nil
}

func (c *Conn) next() ([]byte, error) {
	if c.cur >= 0 && c.rdl.Load() == 0 && !c.closed.Load() {
		if b, ok := c.rc.record(); ok {
			c.rxBytes += uint64(len(b))
			c.rxMsgs++
			return b, nil
		}
	}
	if err := c.readable(); err != nil {
		return nil, err
	}
	if err := c.waitMessage(); err != nil {
		return nil, err
	}
	if ch := c.rc.chunk(); uint64(len(ch)) == c.rc.left {
		// The buffer stays the reader's until its next read.
		c.rc.consume(len(ch))
		c.rxBytes += uint64(len(ch))
		c.rxMsgs++
		return ch, nil
	}
	buf := c.joined
	if n := int(c.rc.left); cap(buf) < n {
		buf = make([]byte, n)
		if n <= c.spareLimit() {
			c.joined = buf // kept for the next one; larger ones are not
		}
	}
	n, err := c.readRest(buf[:c.rc.left])
	if err != nil {
		return nil, err
	}
	return buf[:n:n], nil
}

// nextInPage is NextMessage's common case: the next record lies whole in
// the page the reader holds, and no deadline or Close needs looking at.
func (c *Conn) nextInPage() (Message, bool) {
	if c.cur < 0 || c.rdl.Load() != 0 || c.closed.Load() || !c.zeroCopy.Load() {
		return Message{}, false
	}
	b, ok := c.rc.record()
	if !ok {
		return Message{}, false
	}
	c.rxBytes += uint64(len(b))
	c.rxMsgs++
	c.handed++
	m := Message{c: c, b: b, slot: int32(c.cur)}
	if c.rc.off == len(c.rc.buf) {
		c.leaveBuffer()
	}
	return m, true
}

// maxSpares bounds the spare buffers a connection keeps for NextMessage,
// each at most spareLimit bytes: larger ones are left to the collector.
const maxSpares = 4

func (c *Conn) spareLimit() int { return 4 * c.rxBufSize }

func (c *Conn) spareBuffer(n int) []byte {
	c.freeMu.Lock()
	for i := len(c.spares) - 1; i >= 0; i-- {
		if b := c.spares[i]; cap(b) >= n {
			c.spares[i] = c.spares[len(c.spares)-1]
			c.spares[len(c.spares)-1] = nil
			c.spares = c.spares[:len(c.spares)-1]
			c.freeMu.Unlock()
			return b[:n]
		}
	}
	c.freeMu.Unlock()
	return make([]byte, n)
}

func (c *Conn) putSpare(b []byte) {
	if cap(b) > c.spareLimit() {
		return
	}
	c.freeMu.Lock()
	if len(c.spares) < maxSpares {
		c.spares = append(c.spares, b[:0])
	}
	c.freeMu.Unlock()
}

// waitMessage waits until the first bytes of a message (or the rest of a
// partly read one) are at hand.
func (c *Conn) waitMessage() error {
	for {
		ok, err := c.position()
		if err != nil {
			return c.opError("read", err)
		}
		if ok {
			return nil
		}
		if err := c.waitReadable(); err != nil {
			return err
		}
	}
}

// readRest copies the rest of the current message into p, which is large
// enough, waiting for its later buffers.
func (c *Conn) readRest(p []byte) (int, error) {
	n := 0
	for {
		k := copy(p[n:], c.rc.chunk())
		c.consume(k)
		n += k
		if !c.rc.inMsg {
			return n, nil
		}
		// The rest of the message is still coming. On an error, what was
		// consumed stays consumed: the next call returns the rest.
		if err := c.waitMessage(); err != nil {
			return n, err
		}
	}
}

// consume moves past k bytes of the current message, handing the buffer
// back as soon as the reader is done with it, so that the peer gets its
// credit without waiting for the next read.
func (c *Conn) consume(k int) {
	c.rc.consume(k)
	c.rxBytes += uint64(k)
	if !c.rc.inMsg {
		c.rxMsgs++
	}
	if c.rc.off == len(c.rc.buf) && !c.rc.ready() && !c.rc.more() {
		c.leaveBuffer()
	}
}

// position makes the reader stand at bytes of a message, or at an empty
// message, decoding the next buffer when the current one is done. It
// reports false when that buffer has not arrived yet.
func (c *Conn) position() (bool, error) {
	if c.rerr != nil {
		return false, c.rerr
	}
	for {
		if c.cur >= 0 {
			if c.rc.ready() {
				return true, nil
			}
			if c.rc.more() {
				if err := c.rc.begin(); err != nil {
					return false, c.readFailed(err)
				}
				continue
			}
			c.leaveBuffer()
		}
		slot, ok := c.rxReady.peek()
		if !ok {
			return false, nil
		}
		off := int(slot) * c.rxBufSize
		h := readHeader(c.rxMem[off:])
		c.cur = int(slot)
		if err := c.rc.enter(c.rxMem[off+headerSize:off+headerSize+int(h.fragLen)], h); err != nil {
			return false, c.readFailed(err)
		}
	}
}

// readFailed ends the connection because what the peer sent does not
// decode; the reactor closes it, and every later read returns err.
func (c *Conn) readFailed(err error) error {
	c.rerr = err
	// Nothing more is read from this buffer, fast paths included.
	c.rc.buf, c.rc.off, c.rc.inMsg, c.rc.left = nil, 0, false, 0
	c.eng.r.SubmitFunc(func() { c.fail(err) })
	return err
}

// leaveBuffer is the reader done with its current buffer: it goes back to
// the reactor unless messages NextMessage handed out still use it.
func (c *Conn) leaveBuffer() {
	slot := uint32(c.cur)
	c.rxReady.pop()
	c.cur = -1
	c.rc.buf, c.rc.off = nil, 0
	c.stats.messagesReceived.Store(c.rxMsgs)
	c.stats.bytesReceived.Store(c.rxBytes)
	if h := c.handed; h != 0 {
		c.handed = 0
		if c.rxRefs[slot].Add(h) != 0 {
			return // the last Release frees it
		}
	}
	c.freeBuffer(slot)
}

// freeBuffer hands a receive buffer back to the reactor for re-posting.
// The reader and Message.Release both call it, so pushes are serialised.
func (c *Conn) freeBuffer(slot uint32) {
	c.freeMu.Lock()
	c.rxFree.push(slot)
	n := c.rxFree.len()
	c.freeMu.Unlock()
	if n >= c.rxKickAt || c.rxUrgent.Load() {
		c.kick()
	}
}

// readable checks, before a read, for Close and a passed deadline.
func (c *Conn) readable() error {
	if c.closed.Load() {
		return c.opError("read", net.ErrClosed)
	}
	if expired(&c.rdl) {
		return c.opError("read", os.ErrDeadlineExceeded)
	}
	if c.cfg.OnMessage != nil {
		return c.opError("read", errOnMessage)
	}
	return nil
}

// arrived reports whether a buffer the reader does not hold yet is ready.
func (c *Conn) arrived() bool {
	n := c.rxReady.len()
	if c.cur >= 0 {
		n--
	}
	return n > 0
}

var errOnMessage = errors.New("netio: messages go to Config.OnMessage")

// errCutShort is a stream that ended inside a message.
var errCutShort = fmt.Errorf("%w: connection ended inside a message", io.ErrUnexpectedEOF)

// waitReadable blocks until a buffer arrives, the connection ends, Close
// is called or the read deadline passes.
func (c *Conn) waitReadable() error {
	if c.poll(c.arrived) {
		return nil
	}
	c.rxWaiting.Store(true)
	if c.arrived() {
		c.stopWaiting(&c.rxWaiting)
		return nil
	}
	select {
	case <-c.dead:
		c.stopWaiting(&c.rxWaiting)
		if c.arrived() {
			return nil
		}
		if c.rerr != nil {
			return c.opError("read", c.rerr)
		}
		if errors.Is(c.deadErr, io.EOF) {
			if c.rc.inMsg {
				return c.opError("read", errCutShort)
			}
			return io.EOF
		}
		return c.opError("read", c.deadErr)
	default:
	}
	if isClosed(c.closing) {
		c.stopWaiting(&c.rxWaiting)
		return c.opError("read", net.ErrClosed)
	}
	parks.Add(1)
	err := c.rxWake.wait()
	c.stopWaiting(&c.rxWaiting)
	if err != nil {
		if isClosed(c.closing) {
			return c.opError("read", net.ErrClosed)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && !c.arrived() {
			return c.opError("read", os.ErrDeadlineExceeded)
		}
	}
	return nil // the caller looks again
}
