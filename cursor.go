package netio

// cursor is the reading goroutine's position in the messages of received
// buffers, whatever their framing: the frameReader moves it from buffer to
// buffer and from message to message, and the reader copies out of it.
type cursor struct {
	buf   []byte // payload of the buffer being read
	off   int    // next unread byte of buf
	left  uint64 // bytes of the current message not yet read
	inMsg bool   // at a message (possibly empty) whose bytes start at off
	max   uint64 // largest message accepted
	tag   uint64 // tagged pages: the current message's tag
	seq   uint64 // and its sequence number
}

// ready reports whether bytes of the current message (or an empty
// message) are at hand in this buffer.
func (c *cursor) ready() bool {
	return c.inMsg && (c.left == 0 || c.off < len(c.buf))
}

// more reports whether the buffer holds another message to begin.
func (c *cursor) more() bool { return !c.inMsg && c.off < len(c.buf) }

// chunk is the current message's bytes in this buffer.
func (c *cursor) chunk() []byte {
	end := len(c.buf)
	if rest := uint64(end - c.off); c.left < rest {
		end = c.off + int(c.left)
	}
	return c.buf[c.off:end:end]
}

// consume moves past k bytes of the current message.
func (c *cursor) consume(k int) {
	c.off += k
	c.left -= uint64(k)
	if c.left == 0 {
		c.inMsg = false
	}
}

// drop forgets the buffer and any message in it: after a decoding error
// nothing more is read from it, fast paths included.
func (c *cursor) drop() { c.buf, c.off, c.inMsg, c.left = nil, 0, false, 0 }

// leave forgets the buffer, keeping a message that goes on in the next.
func (c *cursor) leave() { c.buf, c.off = nil, 0 }
