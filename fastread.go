package netio

import (
	"math/bits"
	"sync/atomic"

	"github.com/netio-go/netio/internal/page"
)

// fastRead lets NextMessage take a message that lies whole in the page the
// reader stands in with one compare-and-swap and no lock. On this 2-core
// VM each locked instruction costs 6 to 15 ns, and NextMessage+Release of a
// 64-byte message paid three of them: the read lock, its unlock and the
// Release. The position of the next record in the page, the number of the
// next Message lent from it (lending, message.go) and an epoch are one word, state;
// a reader that has read the record at that position claims it by moving
// the word past it. Concurrent readers stay safe: of two that read the same
// position, one CAS fails and that reader looks again.
//
// Everything else the readers do (entering and leaving pages, messages that
// span pages, Read, Next, deadlines, errors) stays under the read lock
// (receiver.mu), which closes the word when it is taken (absorb: one atomic
// AND that also tells the lock holder how far the claims got) and opens it
// again, at a new epoch, when NextMessage lets go (reopen). While the word
// is open nobody holds the lock, and the fast path reads nothing the lock
// guards: the page is found from views, written before the word that names
// its epoch is stored.
//
// A reader descheduled between its load and its CAS may read a page that
// the fabric is rewriting; whatever it reads, bounds checks keep it inside
// the receive region, and its CAS fails, because the word has moved on to
// a later epoch. It could succeed only if the word came back to the same
// value, after 2^epochBits reopenings (at least 2^minEpochBits): a
// goroutine asleep through a million page visits that wakes at the very
// record where the reader then stands.
type fastRead struct {
	state atomic.Uint64
	// views holds the page of each epoch, by its parity: the slot << 32
	// and the payload's length. A view is rewritten two epochs later.
	views [2]atomic.Uint64

	// Set once, under the read lock, before the word first opens.
	offBits, idxShift, epochShift uint
	offMask, idxMask              uint64
	max                           uint64 // largest message accepted

	// Under the read lock: where the word was opened, for the counts.
	openOff, openIdx uint64
}

const (
	fastOpen = uint64(1) << 63
	// minEpochBits bounds how soon the word may come back to a value it
	// had: buffers too large to leave this many bits keep to the lock.
	minEpochBits = 20
)

// setup sizes the word's fields for buffers of bufSize bytes that lend at
// most perBuffer messages a visit; it reports false if they leave too few
// bits for the epoch, and the fast path stays off. Under the read lock.
func (f *fastRead) setup(bufSize, perBuffer int, max uint64) bool {
	offBits := uint(bits.Len(uint(bufSize)))
	idxBits := uint(bits.Len(uint(perBuffer)))
	if 63-offBits-idxBits < minEpochBits {
		return false
	}
	f.offBits, f.idxShift, f.epochShift = offBits, offBits, offBits+idxBits
	f.offMask, f.idxMask = 1<<offBits-1, 1<<idxBits-1
	f.max = max
	return true
}

// on reports whether setup succeeded. Under the read lock.
func (f *fastRead) on() bool { return f.offBits != 0 }

// absorb closes the word and moves the reader past what was claimed since
// it opened. With the read lock, when the word is open.
func (r *receiver) absorb() {
	f := &r.fast
	s := f.state.And(^fastOpen)
	if s&fastOpen == 0 {
		return
	}
	off, idx := s&f.offMask, (s>>f.idxShift)&f.idxMask
	n := idx - f.openIdx
	r.msgs += n
	r.bytes += off - f.openOff - n*page.PrefixSize
	r.pos.Off = int(off)
	r.lent = int32(idx)
}

// reopen opens the word at the reader's position, at the next epoch, if
// NextMessage can go on there without the lock: lending started, at a
// record boundary in a page with bytes left, nothing failed. Under the read
// lock, just before it is let go; the word is closed.
func (r *receiver) reopen() {
	f := &r.fast
	if !f.on() || r.slot < 0 || r.pos.InMsg || r.failed != nil || r.pos.Off >= len(r.pos.Buf) {
		return
	}
	epoch := (f.state.Load() >> f.epochShift) + 1
	f.views[epoch&1].Store(uint64(r.slot)<<32 | uint64(len(r.pos.Buf)))
	f.openOff, f.openIdx = uint64(r.pos.Off), uint64(r.lent)
	f.state.Store(fastOpen | (epoch<<f.epochShift)&^fastOpen | f.openIdx<<f.idxShift | f.openOff)
}

// lock takes the read lock and closes the fast path.
func (r *receiver) lock() {
	r.mu.Lock()
	if r.fast.state.Load()&fastOpen != 0 {
		r.absorb()
	}
}

// unlockOpen lets the read lock go, opening the fast path first: what
// NextMessage does. The other reads leave it closed until the next
// NextMessage, so that a connection read only with them pays nothing.
func (r *receiver) unlockOpen() {
	r.reopen()
	r.mu.Unlock()
}
