package page

// Cursor is a reader's position in the messages of received pages: the
// Reader moves it from page to page and from record to record, and the
// reader copies out of it.
type Cursor struct {
	Buf   []byte // payload of the page being read
	Off   int    // next unread byte of Buf
	Left  uint64 // bytes of the current message not yet read
	InMsg bool   // at a message (possibly empty) whose bytes start at Off
	Max   uint64 // largest message accepted
	Tag   uint64 // tagged pages: the current message's tag
	Seq   uint64 // and its sequence number
}

// Ready reports whether bytes of the current message (or an empty
// message) are at hand in this page.
func (c *Cursor) Ready() bool {
	return c.InMsg && (c.Left == 0 || c.Off < len(c.Buf))
}

// More reports whether the page holds another record to begin.
func (c *Cursor) More() bool { return !c.InMsg && c.Off < len(c.Buf) }

// Chunk is the current message's bytes in this page.
func (c *Cursor) Chunk() []byte {
	end := len(c.Buf)
	if rest := uint64(end - c.Off); c.Left < rest {
		end = c.Off + int(c.Left)
	}
	return c.Buf[c.Off:end:end]
}

// Consume moves past k bytes of the current message.
func (c *Cursor) Consume(k int) {
	c.Off += k
	c.Left -= uint64(k)
	if c.Left == 0 {
		c.InMsg = false
	}
}

// Drop forgets the page and any message in it: after a decoding error
// nothing more is read from it, fast paths included.
func (c *Cursor) Drop() { c.Buf, c.Off, c.InMsg, c.Left = nil, 0, false, 0 }

// Leave forgets the page, keeping a message that goes on in the next.
func (c *Cursor) Leave() { c.Buf, c.Off = nil, 0 }
