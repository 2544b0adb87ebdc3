package page

import "github.com/netio-go/netio/internal/wire"

// InlineReader walks the messages of received pages where they arrive, on
// the reactor, and hands each to a function (netio's Config.OnMessage):
// the same Reader and Cursor as a reading goroutine's, with a message that
// spans pages joined into assembled. What it joins grows with the bytes
// that arrive, never with the length a peer announces.
type InlineReader struct {
	r         Reader
	pos       Cursor
	assembled []byte // the message that goes on in the next page
}

// NewInlineReader reads pages of format f, messages of at most max bytes.
func NewInlineReader(f Format, max uint64) InlineReader {
	return InlineReader{r: f.Reader(), pos: Cursor{Max: max}}
}

// Deliver hands each message that ends in payload, the data of a page
// with header h, to f; an error ends the connection.
func (d *InlineReader) Deliver(payload []byte, h wire.Header, f func([]byte)) error {
	c := &d.pos
	if err := d.r.Enter(c, payload, h); err != nil {
		return err
	}
	for {
		switch {
		case c.Ready():
			ch := c.Chunk()
			c.Consume(len(ch))
			if !c.InMsg && len(d.assembled) == 0 {
				f(ch) // the whole message is in this page
				continue
			}
			d.assembled = append(d.assembled, ch...)
			if !c.InMsg {
				f(d.assembled)
				d.assembled = d.assembled[:0]
			}
		case c.More():
			if b, ok := d.r.Record(c); ok {
				f(b)
				continue
			}
			if err := d.r.Begin(c); err != nil {
				c.Drop()
				return err
			}
		default:
			c.Leave()
			return nil
		}
	}
}
