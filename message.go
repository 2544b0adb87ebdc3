package netio

import (
	"sync"
	"sync/atomic"
)

// Message is a received message read by NextMessage without a copy: its
// bytes are the receive buffer the fabric wrote them to. They stay valid
// until Release, also after later reads; the buffer goes back to the
// fabric (and becomes a credit for the peer) once every message in it is
// released. Holding messages therefore holds the peer back: a connection
// has Config.Window buffers, and a peer that has filled them all waits.
//
// Release must be called exactly once per message; a Message is a small
// value and may be copied, but not released twice.
//
// A Message from a Subscription is a copy, made so that one subscription
// holding messages never holds back the others on the same connection;
// its Release recycles the copy's memory, and it has a Tag and a Seq.
type Message struct {
	r     *receiver
	chunk *chunk // a subscription's copy: the arena chunk holding b
	b     []byte
	slot  int32 // receive buffer holding b; -1 for a spare buffer
	tag   uint64
	seq   uint64
}

// Tag returns the tag the message was published under (0 for messages of
// a Conn).
func (m Message) Tag() uint64 { return m.tag }

// Seq returns the message's sequence number: the publisher counts each
// tag's messages from 0, so a jump between two messages of a tag is that
// many messages lost. 0 for messages of a Conn.
func (m Message) Seq() uint64 { return m.seq }

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
	case m.chunk != nil:
		m.chunk.release()
	case m.r == nil:
	case m.slot >= 0:
		if m.r.q.refs[m.slot].Add(-1) == 0 {
			m.r.giveBack(uint32(m.slot))
		}
	default:
		m.r.spares.put(m.b)
	}
}

// sparePool keeps a few buffers for messages that arrived in several
// receive buffers and had to be joined, so that the steady state of
// NextMessage allocates nothing. Release puts them back from any goroutine.
type sparePool struct {
	mu    sync.Mutex
	bufs  [][]byte
	limit int // larger buffers are left to the collector
}

// maxSpares bounds the buffers a pool keeps.
const maxSpares = 4

func (p *sparePool) get(n int) []byte {
	p.mu.Lock()
	for i := len(p.bufs) - 1; i >= 0; i-- {
		if b := p.bufs[i]; cap(b) >= n {
			p.bufs[i] = p.bufs[len(p.bufs)-1]
			p.bufs[len(p.bufs)-1] = nil
			p.bufs = p.bufs[:len(p.bufs)-1]
			p.mu.Unlock()
			return b[:n]
		}
	}
	p.mu.Unlock()
	return make([]byte, n)
}

func (p *sparePool) put(b []byte) {
	if cap(b) > p.limit {
		return
	}
	p.mu.Lock()
	if len(p.bufs) < maxSpares {
		p.bufs = append(p.bufs, b[:0])
	}
	p.mu.Unlock()
}

// arena holds a subscription's message copies in chunks that are reused
// once every message in them is released: the steady state allocates
// nothing, and a message that is never released only keeps its chunk from
// being reused (the collector takes it).
type arena struct {
	mu   sync.Mutex
	free []*chunk
	cur  *chunk // the dispatcher's: being filled
}

type chunk struct {
	a    *arena
	buf  []byte
	off  int          // the dispatcher's
	refs atomic.Int32 // messages out, plus one while it is being filled
}

const (
	chunkSize = 64 << 10
	// maxFreeChunks bounds the chunks an arena keeps for reuse (16 MiB):
	// enough for a full channel of 4 KiB messages to come back without
	// the arena allocating while its reader catches up.
	maxFreeChunks = 256
)

// copyOf returns a copy of b and the chunk it lies in (nil for a message
// too large to share a chunk: its own allocation). Dispatcher only.
func (a *arena) copyOf(b []byte) ([]byte, *chunk) {
	n := len(b)
	if n > chunkSize/4 {
		return append([]byte(nil), b...), nil
	}
	c := a.cur
	if c == nil || len(c.buf)-c.off < n {
		if c != nil {
			c.release() // no longer filled
		}
		c = a.take()
		a.cur = c
	}
	dst := c.buf[c.off : c.off+n : c.off+n]
	copy(dst, b)
	c.off += n
	c.refs.Add(1)
	return dst, c
}

func (a *arena) take() *chunk {
	a.mu.Lock()
	if k := len(a.free); k > 0 {
		c := a.free[k-1]
		a.free[k-1] = nil
		a.free = a.free[:k-1]
		a.mu.Unlock()
		c.off = 0
		c.refs.Store(1)
		return c
	}
	a.mu.Unlock()
	c := &chunk{a: a, buf: make([]byte, chunkSize)}
	c.refs.Store(1)
	return c
}

// release drops one reference; the last puts the chunk back. Any goroutine.
func (c *chunk) release() {
	switch n := c.refs.Add(-1); {
	case n == 0:
		a := c.a
		a.mu.Lock()
		if len(a.free) < maxFreeChunks {
			a.free = append(a.free, c)
		}
		a.mu.Unlock()
	case n < 0:
		panic("netio: Message released twice")
	}
}
