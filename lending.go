package netio

import "sync/atomic"

// releasedTwice is the panic of a second Release of one Message, the way
// sync.WaitGroup panics on a negative counter: a program that does it has
// a bug that would otherwise overwrite the bytes of a message it still
// holds, silently.
const releasedTwice = "netio: Message released twice"

// lending tracks the Messages a connection's reader hands out from its
// receive buffers (NextMessage), so that a second Release of one of them
// panics instead of handing the buffer back to the fabric while another
// message still points into it.
//
// A buffer's count of messages out (recvQueue.refs) cannot tell: a second
// Release of one message looks like the first Release of another. So the
// reader numbers the messages it hands out from a buffer on each visit to
// it (0, 1, ...), a bit per number says which are out, and a Message
// carries its buffer, its number and the buffer's generation, which moves
// on every time the buffer goes back to the fabric. Release clears the
// message's bit, and panics if it was already clear, or if the generation
// has moved on (the message was released and its buffer reused since).
// Nothing is allocated per message: the bits are allocated once, at the
// connection's first NextMessage, one per 8 bytes of buffer with pages
// (8 bytes is the smallest record) and one per buffer with fragments.
//
// A Message is a value: a copy is the same message, with the same number,
// and releasing the original and a copy is releasing it twice.
type lending struct {
	gens  []atomic.Uint32 // per buffer: times it went back to the fabric
	bits  []atomic.Uint64 // per buffer, words of it: the messages out
	words int             // words per buffer
}

// messagesPerBuffer bounds the messages a reader can hand out from one
// buffer of bufSize bytes on one visit.
func messagesPerBuffer(f frameReader, bufSize int) int {
	if _, ok := f.(fragmentReader); ok {
		return 1 // one message, or the rest of one, per buffer
	}
	// Pages: each record takes its prefix at least, and the first
	// message may continue the previous page's without one.
	return (bufSize-headerSize)/prefixSize + 1
}

// start allocates the bits; by the reader, before its first Message.
func (l *lending) start(buffers, perBuffer int) {
	l.words = (perBuffer + 63) / 64
	l.gens = make([]atomic.Uint32, buffers)
	l.bits = make([]atomic.Uint64, buffers*l.words)
}

// started reports whether messages are tracked. The reader, or a Release
// of one of its messages.
func (l *lending) started() bool { return l.gens != nil }

// lend marks message n of slot's current visit as out and returns the
// slot's generation for it. Reader only.
func (l *lending) lend(slot int, n int32) uint32 {
	l.bits[slot*l.words+int(n>>6)].Or(1 << (n & 63))
	return l.gens[slot].Load()
}

// release marks message n of slot, of generation gen, as back, and panics
// if it already was. Any goroutine.
func (l *lending) release(slot int32, gen, n uint32) {
	if l.gens[slot].Load() != gen {
		panic(releasedTwice)
	}
	mask := uint64(1) << (n & 63)
	if l.bits[int(slot)*l.words+int(n>>6)].And(^mask)&mask == 0 {
		panic(releasedTwice)
	}
}

// recycle moves slot to its next generation, as it goes back to the
// fabric: its messages are all back, so its bits are all clear.
func (l *lending) recycle(slot uint32) {
	if l.started() {
		l.gens[slot].Add(1)
	}
}
