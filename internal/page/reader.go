package page

import (
	"encoding/binary"
	"fmt"

	"github.com/netio-go/netio/internal/wire"
)

// Record is the record at off of page when it lies whole in the page and
// its message is at most max bytes: the bounds of its message. prefix is
// the format's. It is the one decoder of whole records: the readers'
// common case, inlined into their loops.
func Record(page []byte, off, prefix int, max uint64) (start, end int, ok bool) {
	if len(page)-off < prefix {
		return 0, 0, false
	}
	n := binary.LittleEndian.Uint64(page[off:])
	start = off + prefix
	if n > uint64(len(page)-start) || n > max {
		return 0, 0, false
	}
	return start, start + int(n), true
}

// Reader walks the records of received pages with a Cursor.
type Reader struct{ prefix int }

// Prefix is the bytes before a record's message.
func (r Reader) Prefix() int { return r.prefix }

// Enter starts reading payload, the data of a page with header h, where
// the previous page left the cursor: it checks that the page continues
// exactly what the previous one left of its last message.
func (Reader) Enter(c *Cursor, payload []byte, h wire.Header) error {
	c.Buf, c.Off = payload, 0
	want := uint64(0)
	if c.InMsg {
		want = min(c.Left, uint64(len(payload)))
	}
	if h.MsgLen != want {
		if c.InMsg {
			return fmt.Errorf("%w: page continues %d bytes of a message with %d bytes left", wire.ErrProtocol, h.MsgLen, c.Left)
		}
		return fmt.Errorf("%w: page continues %d bytes of no message", wire.ErrProtocol, h.MsgLen)
	}
	if c.InMsg && c.Left > uint64(len(payload)) && len(payload) == 0 {
		return fmt.Errorf("%w: empty page inside a message", wire.ErrProtocol)
	}
	return nil
}

// Begin starts the next record at c.Off, which may go on in the next
// pages: the cursor is between messages and the page has bytes left.
func (r Reader) Begin(c *Cursor) error {
	rest := len(c.Buf) - c.Off
	if rest < r.prefix {
		return fmt.Errorf("%w: page ends with %d bytes of a length prefix", wire.ErrProtocol, rest)
	}
	n := binary.LittleEndian.Uint64(c.Buf[c.Off:])
	if n > c.Max {
		return fmt.Errorf("%w: peer sent %d bytes, limit %d", wire.ErrMessageTooLarge, n, c.Max)
	}
	r.tagOf(c)
	c.Off += r.prefix
	c.InMsg, c.Left = true, n
	return nil
}

// tagOf reads a tagged record's tag and sequence number into c.
func (r Reader) tagOf(c *Cursor) {
	if r.prefix == TaggedPrefixSize {
		c.Tag = binary.LittleEndian.Uint64(c.Buf[c.Off+8:])
		c.Seq = binary.LittleEndian.Uint64(c.Buf[c.Off+16:])
	}
}

// Records is Record for as many of the next records as dst takes, into
// dst, with the cursor in locals: it returns how many it took and their
// bytes. Untagged pages only (tagged ones go record by record).
func (r Reader) Records(c *Cursor, dst [][]byte) (n int, bytes uint64) {
	if c.InMsg || r.prefix != PrefixSize {
		return 0, 0
	}
	buf, off, limit := c.Buf, c.Off, c.Max
	for n < len(dst) {
		start, end, ok := Record(buf, off, PrefixSize, limit)
		if !ok {
			break
		}
		off = end
		dst[n] = buf[start:end:end]
		n++
		bytes += uint64(end - start)
	}
	c.Off = off
	return n, bytes
}

// Record is the next record when it lies whole in the page and is within
// the limit; false changes nothing.
func (r Reader) Record(c *Cursor) ([]byte, bool) {
	if c.InMsg {
		return nil, false
	}
	start, end, ok := Record(c.Buf, c.Off, r.prefix, c.Max)
	if !ok {
		return nil, false
	}
	r.tagOf(c)
	c.Off = end
	return c.Buf[start:end:end], true
}

// CountRecords counts the records that begin in payload, a page of ours
// whose first cont bytes continue an earlier message: what a publisher
// that gives up on its unsent pages reports undelivered.
func CountRecords(payload []byte, cont uint64, prefix int) uint64 {
	off := uint64(min(cont, uint64(len(payload))))
	var n uint64
	for uint64(len(payload))-off >= uint64(prefix) {
		size := binary.LittleEndian.Uint64(payload[off:])
		n++
		off += uint64(prefix) + min(size, uint64(len(payload))-off-uint64(prefix))
	}
	return n
}
