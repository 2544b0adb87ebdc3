package netio

import "fmt"

// fragments is the LowLatency framing: every send buffer carries one
// message, or one piece of a message larger than a buffer, behind the
// 16-byte header (kind kindData): fragLen is the piece, msgLen the whole
// message, and flagLast marks its last piece. Nothing waits for company:
// each buffer goes out as soon as it is written.
type fragments struct{}

func (fragments) writer(payloadMax int) frameWriter { return &fragmentWriter{payloadMax: payloadMax} }
func (fragments) checker(maxRecv uint64) frameCheck { return &fragmentCheck{max: maxRecv} }
func (fragments) reader() frameReader               { return fragmentReader{} }

// fragmentWriter fills one buffer per piece of a message.
type fragmentWriter struct {
	payloadMax int
	buf        []byte
	off        int    // bytes used, header included
	msgLen     uint64 // the message being written
	left       uint64 // its bytes not yet put
}

func (w *fragmentWriter) open(buf []byte, _ uint64) { w.buf, w.off = buf, headerSize }

func (w *fragmentWriter) begin(n int) bool {
	if w.off != headerSize {
		return false // one message per buffer
	}
	w.msgLen, w.left = uint64(n), uint64(n)
	return true
}

func (w *fragmentWriter) put(p []byte) int {
	k := copy(w.buf[w.off:headerSize+w.payloadMax], p)
	w.off += k
	w.left -= uint64(k)
	return k
}

func (w *fragmentWriter) appendWhole([]byte) bool { return false }

func (w *fragmentWriter) full() bool { return true }

func (w *fragmentWriter) seal() int {
	h := header{kind: kindData, fragLen: uint32(w.off - headerSize), msgLen: w.msgLen}
	if w.left == 0 {
		h.flags = flagLast
	}
	putHeader(w.buf, h)
	n := w.off
	w.buf, w.off = nil, 0
	return n
}

func (w *fragmentWriter) buffers(n int, _ bool) int {
	return max(1, (n+w.payloadMax-1)/w.payloadMax)
}

func (w *fragmentWriter) lazy() bool { return false }

// fragmentCheck follows the pieces of the message being received, so that
// a reader never sees a piece that does not belong where it arrives.
type fragmentCheck struct {
	max    uint64 // largest message accepted
	msgLen uint64 // the message being received
	left   uint64 // its bytes still to come; 0 between messages
}

func (f *fragmentCheck) check(h header) error {
	if h.kind != kindData {
		return fmt.Errorf("%w: page on a %v connection", ErrProtocol, LowLatency)
	}
	if f.left == 0 {
		if h.msgLen > f.max {
			return fmt.Errorf("%w: peer sent %d bytes, limit %d", ErrMessageTooLarge, h.msgLen, f.max)
		}
		f.msgLen, f.left = h.msgLen, h.msgLen
	} else if h.msgLen != f.msgLen {
		return fmt.Errorf("%w: fragment of a %d-byte message inside a %d-byte one", ErrProtocol, h.msgLen, f.msgLen)
	}
	if uint64(h.fragLen) > f.left {
		return fmt.Errorf("%w: fragment of %d bytes with %d left in the message", ErrProtocol, h.fragLen, f.left)
	}
	f.left -= uint64(h.fragLen)
	if (f.left == 0) != (h.flags&flagLast != 0) {
		return fmt.Errorf("%w: message end flag disagrees with its length", ErrProtocol)
	}
	return nil
}

// fragmentReader: a buffer is all message, checked by fragmentCheck.
type fragmentReader struct{}

func (fragmentReader) enter(c *cursor, payload []byte, h header) error {
	c.buf, c.off = payload, 0
	if !c.inMsg {
		c.inMsg, c.left = true, h.msgLen
	}
	return nil
}

func (fragmentReader) begin(c *cursor) error {
	// Unreachable: the check lets no fragment hold more than its message.
	return fmt.Errorf("%w: bytes after a message in its fragment", ErrProtocol)
}

func (fragmentReader) record(*cursor) ([]byte, bool) { return nil, false }
