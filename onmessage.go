package netio

import "github.com/netio-go/netio/internal/wire"

// hereReader walks the messages of received buffers on the reactor, for
// Config.OnMessage: the same framing and cursor as a reading goroutine's,
// with a message that spans buffers joined into assembled. What it joins
// grows with the bytes that arrive, never with the length a peer
// announces.
type hereReader struct {
	r         frameReader
	pos       cursor
	assembled []byte // the message that goes on in the next buffer
}

// deliver hands each message that ends in payload, the data of a buffer
// with header h, to f; an error ends the connection.
func (d *hereReader) deliver(payload []byte, h wire.Header, f func([]byte)) error {
	c := &d.pos
	if err := d.r.enter(c, payload, h); err != nil {
		return err
	}
	for {
		switch {
		case c.ready():
			ch := c.chunk()
			c.consume(len(ch))
			if !c.inMsg && len(d.assembled) == 0 {
				f(ch) // the whole message is in this buffer
				continue
			}
			d.assembled = append(d.assembled, ch...)
			if !c.inMsg {
				f(d.assembled)
				d.assembled = d.assembled[:0]
			}
		case c.more():
			if b, ok := d.r.record(c); ok {
				f(b)
				continue
			}
			if err := d.r.begin(c); err != nil {
				c.drop()
				return err
			}
		default:
			c.leave()
			return nil
		}
	}
}
