package netio

import (
	"sync/atomic"

	"github.com/netio-go/netio/internal/page"
	"github.com/netio-go/netio/internal/wire"
)

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
// A buffer's count of messages out cannot tell: a second Release of one
// message looks like the first Release of another. So the reader numbers
// the messages it hands out from a buffer on each visit to it (0, 1, ...),
// a bit per number says which are back, and a Message carries its buffer,
// its number and the buffer's generation, which moves on every time the
// buffer goes back to the fabric. Release sets the message's bit, and
// panics if it was already set, or if the generation has moved on (the
// message was released and its buffer reused since). The bits a visit set
// are cleared when its buffer goes back, so that each message costs one
// atomic read-modify-write, in Release (BenchmarkLending on a loaded
// 2-core VM: 27 ns per message with a bit set when lent and cleared when
// released, 7 to 10 ns with this). Nothing is allocated per message: the
// bits are allocated once, at the connection's first NextMessage, one per
// 8 bytes of buffer (8 bytes is the smallest record).
//
// The bits also count what is out, a word at a time: the Release that
// fills a word (all 64 bits set) takes one off the buffer's count of words
// out (recvQueue.refs), and the reader, as it leaves the buffer, sets the
// bits of its last word that no message took and counts the words it
// filled. A Release is then one atomic operation, not two: it was a
// counter's add besides the bit (NextMessage+Release of 64 B messages in
// one process: the add cost 12 ns of the reader's 32, measured with perf).
type lending struct {
	gens  []atomic.Uint32 // per buffer: times it went back to the fabric
	bits  []atomic.Uint64 // per buffer, words of it: the messages back
	lent  []int32         // per buffer: messages handed out on the visit that ended
	words int             // words per buffer
}

// messagesPerBuffer bounds the messages a reader can hand out from one
// buffer of bufSize bytes on one visit.
func messagesPerBuffer(bufSize int) int {
	// Pages: each record takes its prefix at least, and the first
	// message may continue the previous page's without one.
	return (bufSize-wire.HeaderSize)/page.PrefixSize + 1
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
// if it already was. It reports whether that filled the message's word:
// the caller takes the word off the buffer's count. Any goroutine.
func (l *lending) release(slot int32, gen, n uint32) bool {
	if l.gens[slot].Load() != gen {
		panic(releasedTwice)
	}
	mask := uint64(1) << (n & 63)
	old := l.bits[int(slot)*l.words+int(n>>6)].Or(mask)
	if old&mask != 0 {
		panic(releasedTwice)
	}
	return old|mask == ^uint64(0)
}

// isBack reports whether message n of slot, of generation gen, has been
// released. Any goroutine.
func (l *lending) isBack(slot int32, gen, n uint32) bool {
	return l.gens[slot].Load() != gen || l.bits[int(slot)*l.words+int(n>>6)].Load()&(uint64(1)<<(n&63)) != 0
}

// left is the reader ending its visit to slot, in which it handed out n
// messages. It records n, so that whoever hands the buffer back knows
// which bits to clear, fills the last word's bits beyond n, and returns
// the words of the visit that are not full yet, for the reader to add to
// slot's count: the Releases that fill them take them off again.
func (l *lending) left(slot uint32, n int32) int32 {
	if n == 0 {
		return 0
	}
	l.lent[slot] = n
	words := (n + 63) / 64
	if k := n % 64; k != 0 {
		pad := ^uint64(0) << k
		if l.bits[int(slot)*l.words+int(words-1)].Or(pad)|pad == ^uint64(0) {
			words-- // its messages are all back already
		}
	}
	return words
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
