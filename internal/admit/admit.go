// Package admit is the admission of a connection request with a
// pre-shared key: sealing a request and an accept, and checking them, with
// the record of requests already admitted that keeps a recorded one from
// being replayed. It does no I/O.
//
// Admission with a pre-shared key (netio's Config.Key). A peer that the listener
// lets in gets its data parsed by the libfabric provider, and libfabric
// 1.17's tcp provider crashes the whole process on some forged headers
// (see netio's ofi/guard.go: an acknowledgement header with no send awaiting one).
// No receive or send netio could post prevents that, so the only defence
// is to keep such a peer out before the provider reads a single data byte
// of its connection: the key is checked in the connection request's
// private data, on the reactor, before the acceptor makes any endpoint or
// posts any buffer for it.
//
// A keyed hello carries wire.FlagKeyed in byte 7 (zero in every hello before
// keys, so a keyless hello is exactly what it was and the protocol level
// stays 1) and an authenticator after the 24 bytes of the hello:
//
//	request (52 bytes): hello[0:24] | time[24:32] | nonce[32:36] | mac[36:52]
//	accept  (40 bytes): hello[0:24] | mac[24:40]
//
// time is the dialer's clock in Unix nanoseconds, nonce 4 random bytes,
// and each mac the first 16 bytes of an HMAC-SHA256 under the key:
//
//	request mac = HMAC(key, "NTIO-REQ" | request[0:36])
//	accept  mac = HMAC(key, "NTIO-ACC" | accept[0:24] | request[24:52])
//
// Both fit the 55 bytes of private data verbs carries. The labels keep a
// request's mac from passing as an accept's. The accept's mac binds the
// listener's answer to this very request (its time, nonce and mac), so a
// recorded accept proves nothing to a later dial, and only a holder of the
// key can answer: the dialer checks it before its link reads anything the
// listener sent (netio's link.onConnected, link.watchCQ).
//
// The listener rejects a request whose time is more than Window from
// its own clock, and one it has already seen in that window (replays): a
// recorded request cannot be used again. Hosts therefore need clocks
// within Window of each other.
package admit

import (
	"container/heap"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/netio-go/netio/internal/wire"
)

// Window is how far a request's time may be from the listener's clock,
// either way: long enough for loosely synchronised hosts and a slow
// set-up, short enough that the replay record stays small.
const Window = 30 * time.Second

// The labels of the two macs: a request's mac cannot pass as an accept's.
var (
	LabelRequest = []byte("NTIO-REQ")
	LabelAccept  = []byte("NTIO-ACC")
)

// MAC is the truncated HMAC of label and parts under key.
func MAC(key, label []byte, parts ...[]byte) [wire.AuthMACSize]byte {
	m := hmac.New(sha256.New, key)
	m.Write(label)
	for _, p := range parts {
		m.Write(p)
	}
	var out [wire.AuthMACSize]byte
	copy(out[:], m.Sum(nil))
	return out
}

// SealRequest is the private data of a connection request: h, and with a
// key its authenticator at now. auth is the trailer the accept must be
// bound to.
func SealRequest(key []byte, h wire.Hello, now time.Time) (data []byte, auth [wire.AuthTrailer]byte) {
	if len(key) == 0 {
		return h.Marshal(), auth
	}
	h.Flags |= wire.FlagKeyed
	data = append(h.Marshal(), make([]byte, wire.AuthTrailer)...)
	binary.LittleEndian.PutUint64(data[wire.HelloSize:], uint64(now.UnixNano()))
	rand.Read(data[wire.HelloSize+wire.AuthTimeSize : wire.HelloSize+wire.AuthTimeSize+wire.AuthNonceSize])
	mac := MAC(key, LabelRequest, data[:wire.AuthRequestSize-wire.AuthMACSize])
	copy(data[wire.AuthRequestSize-wire.AuthMACSize:], mac[:])
	copy(auth[:], data[wire.HelloSize:])
	return data, auth
}

// SealAccept is the private data of the accept answering a request whose
// trailer is reqAuth: h, and with a key the proof that this side holds it.
func SealAccept(key []byte, h wire.Hello, reqAuth [wire.AuthTrailer]byte) []byte {
	if len(key) == 0 {
		return h.Marshal()
	}
	h.Flags |= wire.FlagKeyed
	data := h.Marshal()
	mac := MAC(key, LabelAccept, data, reqAuth[:])
	return append(data, mac[:]...)
}

// OpenAccept checks, with a key, the listener's proof in the accept data,
// for the request whose trailer was reqAuth. Without a key there is
// nothing to check: an insecure dialer trusts whoever answers.
func OpenAccept(key, data []byte, reqAuth [wire.AuthTrailer]byte) error {
	if len(key) == 0 {
		return nil
	}
	if len(data) < wire.AuthAcceptSize || data[7]&wire.FlagKeyed == 0 {
		return &ProofError{Reason: "the listener did not prove it holds the key"}
	}
	want := MAC(key, LabelAccept, data[:wire.HelloSize], reqAuth[:])
	if !hmac.Equal(want[:], data[wire.HelloSize:wire.AuthAcceptSize]) {
		return &ProofError{Reason: "the listener's proof of the key is wrong: it holds another key"}
	}
	return nil
}

// Checker is an acceptor's check of requests against its key.
type Checker struct {
	Key  []byte // nil: keyless peers only
	Seen *ReplayCache
}

var ErrAdmission = errors.New("netio: request failed Checker")

// check admits the request data at now, or returns an error (only for
// tests and logs: the peer is told nothing more than wire.RejectAuthMarker).
// It returns the request's trailer, for the accept to be bound to.
func (a *Checker) Check(data []byte, now time.Time) (auth [wire.AuthTrailer]byte, err error) {
	keyed := len(data) >= wire.HelloSize && data[7]&wire.FlagKeyed != 0
	if len(a.Key) == 0 {
		if keyed {
			// A dialer with a key wants a listener that proves it holds
			// it; this one cannot, so it says no now rather than
			// accept a connection the dialer would drop.
			return auth, fmt.Errorf("%w: key sent to a listener without one", ErrAdmission)
		}
		return auth, nil
	}
	if !keyed || len(data) < wire.AuthRequestSize {
		return auth, fmt.Errorf("%w: no key", ErrAdmission)
	}
	want := MAC(a.Key, LabelRequest, data[:wire.AuthRequestSize-wire.AuthMACSize])
	mac := data[wire.AuthRequestSize-wire.AuthMACSize : wire.AuthRequestSize]
	if !hmac.Equal(want[:], mac) {
		return auth, fmt.Errorf("%w: wrong key", ErrAdmission)
	}
	t := int64(binary.LittleEndian.Uint64(data[wire.HelloSize:]))
	if d := now.UnixNano() - t; d > int64(Window) || d < -int64(Window) {
		return auth, fmt.Errorf("%w: request time %v from this clock", ErrAdmission, time.Duration(d))
	}
	if !a.Seen.Add([wire.AuthMACSize]byte(mac), t, now.UnixNano()) {
		return auth, fmt.Errorf("%w: replayed request", ErrAdmission)
	}
	copy(auth[:], data[wire.HelloSize:wire.AuthRequestSize])
	return auth, nil
}

// ReplayCacheSize bounds the requests remembered. Only requests with a
// valid mac are added, so only holders of the key can fill it; when more
// than this many arrive within Window, the oldest is forgotten and
// nothing as old is admitted any more (the floor), so a replay is never
// let in, at worst a dialer whose clock lags the others is turned away.
// 4,096 entries is a few hundred KiB at most, and 68 connections a second
// sustained over the whole window.
const ReplayCacheSize = 4096

// ReplayCache remembers the macs of admitted requests with their times,
// oldest first in a heap, for as long as they could pass the time check.
type ReplayCache struct {
	mu    sync.Mutex
	limit int
	macs  map[[wire.AuthMACSize]byte]struct{}
	byAge replayHeap
	floor int64 // requests no later than this are refused: forgotten early
}

func NewReplayCache(limit int) *ReplayCache {
	return &ReplayCache{limit: limit, macs: map[[wire.AuthMACSize]byte]struct{}{}, floor: -1 << 63}
}

// add records mac, of a request at time t (both Unix ns), at now, and
// reports whether it is new.
func (c *ReplayCache) Add(mac [wire.AuthMACSize]byte, t, now int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.byAge) > 0 && c.byAge[0].t < now-int64(Window) {
		delete(c.macs, heap.Pop(&c.byAge).(replayEntry).mac)
	}
	if _, dup := c.macs[mac]; dup || t <= c.floor {
		return false
	}
	if len(c.byAge) >= c.limit {
		if t <= c.byAge[0].t {
			return false // older than anything kept: it could not be told from a replay later
		}
		old := heap.Pop(&c.byAge).(replayEntry)
		delete(c.macs, old.mac)
		c.floor = max(c.floor, old.t)
	}
	c.macs[mac] = struct{}{}
	heap.Push(&c.byAge, replayEntry{t: t, mac: mac})
	return true
}

type replayEntry struct {
	t   int64
	mac [wire.AuthMACSize]byte
}

// replayHeap is a min-heap of entries by time.
type replayHeap []replayEntry

func (h replayHeap) Len() int           { return len(h) }
func (h replayHeap) Less(i, j int) bool { return h[i].t < h[j].t }
func (h replayHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *replayHeap) Push(x any)        { *h = append(*h, x.(replayEntry)) }
func (h *replayHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// ProofError is an accept that does not prove the listener holds the key.
type ProofError struct{ Reason string }

func (e *ProofError) Error() string { return e.Reason }
