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
// it (0, 1, ...), a bit per number says which are back, and a Message
// carries its buffer, its number and the buffer's generation, which moves
// on every time the buffer goes back to the fabric. Release sets the
// message's bit, and panics if it was already set, or if the generation
// has moved on (the message was released and its buffer reused since).
// The bits a visit set are cleared when its buffer goes back, so that each
// message costs one atomic read-modify-write, in Release (BenchmarkLending
// on a loaded 2-core VM: 27 ns per message with a bit set when lent and
// cleared when released, 7 to 10 ns with this). Nothing is allocated per message: the bits are
// allocated once, at the connection's first NextMessage, one per 8 bytes
// of buffer (8 bytes is the smallest record).
//
// A Message is a value: a copy is the same message, with the same number,
// and releasing the original and a copy is releasing it twice.
type lending struct {
	gens  []atomic.Uint32 // per buffer: times it went back to the fabric
	bits  []atomic.Uint64 // per buffer, words of it: the messages back
	lent  []int32         // per buffer: messages handed out on the visit that ended
	words int             // words per buffer
}

// messagesPerBuffer bounds the messages a reader can hand out from one
// buffer of bufSize bytes on one visit.
func messagesPerBuffer(f frameReader, bufSize int) int {
	// Pages: each record takes its prefix at least, and the first
	// message may continue the previous page's without one.
	return (bufSize-headerSize)/prefixSize + 1
}

// start allocates the bits; by the reader, before its first Message.
func (l *lending) start(buffers, perBuffer int) {
	l.words = (perBuffer + 63) / 64
	l.gens = make([]atomic.Uint32, buffers)
	l.bits = make([]atomic.Uint64, buffers*l.words)
	l.lent = make([]int32, buffers)
}

// started reports whether messages are tracked. The reader, or a Release
// of one of its messages.
func (l *lending) started() bool { return l.gens != nil }

// gen is slot's generation, for the messages handed out from it. Reader
// only.
func (l *lending) gen(slot int) uint32 { return l.gens[slot].Load() }

// release marks message n of slot, of generation gen, as back, and panics
// if it already was. Any goroutine.
func (l *lending) release(slot int32, gen, n uint32) {
	if l.gens[slot].Load() != gen {
		panic(releasedTwice)
	}
	mask := uint64(1) << (n & 63)
	if l.bits[int(slot)*l.words+int(n>>6)].Or(mask)&mask != 0 {
		panic(releasedTwice)
	}
}

// left records that the reader handed out n messages on the visit to slot
// it is ending, before it counts them in slot's refs: whoever hands the
// buffer back then knows which bits to clear.
func (l *lending) left(slot uint32, n int32) {
	if l.started() {
		l.lent[slot] = n
	}
}

// recycle moves slot to its next generation and clears the bits of its
// visit, as it goes back to the fabric: its messages are all back. The
// generation first, so that a late second Release fails on it.
func (l *lending) recycle(slot uint32) {
	if !l.started() {
		return
	}
	l.gens[slot].Add(1)
	base := int(slot) * l.words
	for i := range (int(l.lent[slot]) + 63) / 64 {
		l.bits[base+i].Store(0)
	}
	l.lent[slot] = 0
}
