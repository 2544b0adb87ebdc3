package netio

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/netio-go/netio/internal/page"
	"github.com/netio-go/netio/internal/wire"
)

// Message is a received message read by NextMessage without a copy: its
// bytes are the receive buffer the fabric wrote them to. They stay valid
// until Release, also after later reads; the buffer goes back to the
// fabric (and becomes a credit for the peer) once every message in it is
// released. Holding messages therefore holds the peer back: a connection
// has Config.Window buffers, and a peer that has filled them all waits.
//
// Release must be called exactly once per message; a second Release of
// it panics. A Message is a small value and may be copied, but a copy is
// the same message: release the original or the copy, not both.
//
// A Message from a Subscription is a copy, made so that one subscription
// holding messages never holds back the others on the same connection;
// its Release recycles the copy's memory, and it has a Tag and a Seq.
type Message struct {
	// own is what holds b, by slot: the receiver (slot >= 0), the spare
	// buffer of a joined message (slotSpare), a subscription's arena chunk
	// (slotChunk); nil for the zero Message and for a subscription's copy
	// too large for a chunk. One untyped pointer rather than three typed
	// ones: with nine words or fewer a Message travels in registers (Go's
	// register ABI), and it is copied on every NextMessage and Release;
	// at eleven words it went through memory (BenchmarkReadPath,
	// NextMessage+Release of 64-byte messages: the copies were 17 of
	// 42 ns per message, pprof).
	own  unsafe.Pointer
	b    []byte
	slot int32  // receive buffer holding b, or slotSpare or slotChunk
	gen  uint32 // generation of the slot, chunk or spare when handed out
	idx  uint32 // the message's number in its slot's visit or its chunk
	tag  uint64
	seq  uint64
}

// Message.slot of a message that is not in a receive buffer.
const (
	slotSpare = -1
	slotChunk = -2
)

// recv is the receiver a message of a Conn came from, or nil.
func (m Message) recv() *receiver {
	switch {
	case m.own == nil || m.slot == slotChunk:
		return nil
	case m.slot == slotSpare:
		return (*spareBuf)(m.own).r
	}
	return (*receiver)(m.own)
}

// Tag returns the tag the message was published under (0 for messages of
// a Conn).
func (m Message) Tag() uint64 { return m.tag }

// Seq returns the message's sequence number: the publisher counts each
// tag's messages from 0, so a jump between two messages of a tag is that
// many messages lost. 0 for messages of a Conn.
func (m Message) Seq() uint64 { return m.seq }

// usedAfterRelease is what Bytes panics with after Release: the buffer
// may hold another message by then, or be filling with one.
const usedAfterRelease = "netio: Message used after Release"

// released reports whether m has been released, where what holds its
// bytes can tell: every Message but the zero one and a subscription's
// message too large for its arena (whose bytes are its own and stay
// valid).
func (m Message) released() bool {
	switch {
	case m.own == nil:
		return false
	case m.slot >= 0:
		return (*receiver)(m.own).q.lending.isBack(m.slot, m.gen, m.idx)
	case m.slot == slotChunk:
		return (*chunk)(m.own).isBack(m.gen, m.idx)
	}
	return (*spareBuf)(m.own).gen.Load() != m.gen
}

// Bytes returns the message, valid until Release. Appending to it
// allocates a copy: its capacity ends with the message. Called after
// Release it panics, as a second Release does: the buffer may hold another
// message by then. A slice that Bytes returned before Release cannot be
// checked so: it must not be used after Release.
func (m Message) Bytes() []byte {
	if m.own != nil && m.released() {
		panic(usedAfterRelease)
	}
	return m.b
}

// Len returns the message's length.
func (m Message) Len() int { return len(m.b) }

// Release gives the message's memory back to the connection. It may be
// called from any goroutine, before or after the connection is closed. On
// the zero Message it does nothing. Called a second time for the same
// message, it panics: a silent second Release would give the buffer back
// to the fabric while another message still points into it.
func (m Message) Release() {
	switch {
	case m.own == nil:
	case m.slot >= 0:
		q := (*receiver)(m.own).q
		if q.lending.release(m.slot, m.gen, m.idx) && q.refs[m.slot].Add(-1) == 0 {
			(*receiver)(m.own).giveBack(uint32(m.slot))
		}
	case m.slot == slotChunk:
		(*chunk)(m.own).releaseMessage(m.gen, m.idx)
	default:
		// The spare's generation moves on with each Release: a second
		// finds it moved, also once the spare holds another message.
		sp := (*spareBuf)(m.own)
		if !sp.gen.CompareAndSwap(m.gen, m.gen+1) {
			panic(releasedTwice)
		}
		sp.r.spares.put(sp)
	}
}

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

// sparePool keeps a few buffers for messages that arrived in several
// receive buffers and had to be joined, so that the steady state of
// NextMessage allocates nothing. Release puts them back from any goroutine.
type sparePool struct {
	mu    sync.Mutex
	bufs  []*spareBuf
	limit int // larger buffers are left to the collector
}

// spareBuf is a spare buffer with its generation, which each Release of
// the message in it moves on.
type spareBuf struct {
	b   []byte
	gen atomic.Uint32
	r   *receiver // whose pool it goes back to
}

// maxSpares bounds the buffers a pool keeps.
const maxSpares = 4

// get returns a spare whose b holds n bytes.
func (p *sparePool) get(n int) *spareBuf {
	p.mu.Lock()
	for i := len(p.bufs) - 1; i >= 0; i-- {
		if sp := p.bufs[i]; cap(sp.b) >= n {
			p.bufs[i] = p.bufs[len(p.bufs)-1]
			p.bufs[len(p.bufs)-1] = nil
			p.bufs = p.bufs[:len(p.bufs)-1]
			p.mu.Unlock()
			sp.b = sp.b[:n]
			return sp
		}
	}
	p.mu.Unlock()
	return &spareBuf{b: make([]byte, n)}
}

func (p *sparePool) put(sp *spareBuf) {
	if cap(sp.b) > p.limit {
		return
	}
	p.mu.Lock()
	if len(p.bufs) < maxSpares {
		p.bufs = append(p.bufs, sp)
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
	n    int          // the dispatcher's: messages copied in since reuse
	refs atomic.Int32 // messages out, plus one while it is being filled
	// gen moves on each time the chunk is reused, and back has a bit per
	// message copied in since, set by its Release: a second Release
	// panics (receive buffers use the same scheme: see lending).
	gen  atomic.Uint32
	back [chunkMessages / 64]atomic.Uint64
}

const (
	chunkSize = 64 << 10
	// chunkMessages bounds the messages of a chunk, so that its bits of
	// messages out are a fixed 512 bytes (0.8% of the chunk): messages of
	// 16 bytes or more fill it by size first.
	chunkMessages = 4096
	// maxFreeChunks bounds the chunks an arena keeps for reuse (16 MiB):
	// enough for a full channel of 4 KiB messages to come back without
	// the arena allocating while its reader catches up.
	maxFreeChunks = 256
)

// message returns a Message of a copy of b, with tag and seq, in a chunk
// (or in an allocation of its own for a message too large to share one).
// Dispatcher only.
func (a *arena) message(b []byte, tag, seq uint64) Message {
	n := len(b)
	if n > chunkSize/4 {
		return Message{b: append([]byte(nil), b...), slot: slotSpare, tag: tag, seq: seq}
	}
	c := a.cur
	if c == nil || len(c.buf)-c.off < n || c.n == chunkMessages {
		if c != nil {
			c.release() // no longer filled
		}
		c = a.take()
		a.cur = c
	}
	dst := c.buf[c.off : c.off+n : c.off+n]
	copy(dst, b)
	c.off += n
	idx := c.n
	c.n++
	c.refs.Add(1)
	return Message{own: unsafe.Pointer(c), b: dst, slot: slotChunk, gen: c.gen.Load(), idx: uint32(idx), tag: tag, seq: seq}
}

func (a *arena) take() *chunk {
	a.mu.Lock()
	if k := len(a.free); k > 0 {
		c := a.free[k-1]
		a.free[k-1] = nil
		a.free = a.free[:k-1]
		a.mu.Unlock()
		c.gen.Add(1) // first: a late second Release fails on it
		for i := range (c.n + 63) / 64 {
			c.back[i].Store(0)
		}
		c.off, c.n = 0, 0
		c.refs.Store(1)
		return c
	}
	a.mu.Unlock()
	c := &chunk{a: a, buf: make([]byte, chunkSize)}
	c.refs.Store(1)
	return c
}

// isBack reports whether message idx of the chunk's generation gen has
// been released. Any goroutine.
func (c *chunk) isBack(gen, idx uint32) bool {
	return c.gen.Load() != gen || c.back[idx>>6].Load()&(uint64(1)<<(idx&63)) != 0
}

// releaseMessage is the Release of message idx of generation gen. Any
// goroutine.
func (c *chunk) releaseMessage(gen, idx uint32) {
	mask := uint64(1) << (idx & 63)
	if c.gen.Load() != gen || c.back[idx>>6].Or(mask)&mask != 0 {
		panic(releasedTwice)
	}
	c.release()
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
