package netio

import "sync"

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
	r    *receiver
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
