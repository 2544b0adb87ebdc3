// Package tagseq is one tag's sequence as a subscriber receives it: which
// message is next, and which are missing, from the messages, the
// publisher's acknowledgements and its farewell.
package tagseq

// Seq is one tag's sequence as a subscriber's connection receives it:
// which message comes next, what the publisher's acknowledgements and
// farewell said, and so what is missing. It does no I/O and takes no
// lock: the connection's dispatcher owns it, and feeds it the messages
// and the publisher's words in the order they arrived.
//
// A gap is reported as first and n: messages first to first+n-1 of the
// tag did not arrive.
type Seq struct {
	next  uint64 // the sequence number expected next, when known
	ack   uint64 // the newest acknowledgement's next sequence number
	known bool
	acked bool // an acknowledgement came since the tag was (re)subscribed
	// awaiting: the tag is new to the connection and no message of it
	// has been taken yet. Messages before its acknowledgement, or
	// numbered before it, come from an earlier subscription of the tag on
	// the same connection (its unsubscribe was on its way): not ours.
	awaiting bool
}

// New is a tag just subscribed on the connection.
func New() Seq { return Seq{awaiting: true} }

// OnAck takes an acknowledgement: the publisher's next message of the tag
// is next. Until a message says otherwise, that is where the sequence
// stands.
func (t *Seq) OnAck(next uint64) {
	t.ack, t.acked = next, true
	if !t.known {
		t.next, t.known = next, true
	}
}

// PastAck reports whether seq comes at or after the newest
// acknowledgement; false before any.
func (t *Seq) PastAck(seq uint64) bool { return t.acked && seq >= t.ack }

// Take decides about message seq: whether it belongs to the
// subscription, and which messages before it are missing.
func (t *Seq) Take(seq uint64) (ok bool, first, n uint64) {
	if t.awaiting {
		if !t.PastAck(seq) {
			return false, 0, 0
		}
		t.awaiting = false
	}
	if t.known && seq > t.next {
		first, n = t.next, seq-t.next
	}
	t.next, t.known = seq+1, true
	return true, first, n
}

// Final takes the publisher's farewell, read once every message before it
// was taken: the tag's next message would have been next.
func (t *Seq) Final(next uint64) (first, n uint64) {
	if t.known && next > t.next {
		first, n = t.next, next-t.next
		t.next = next
	}
	return first, n
}

// ExpectAck forgets the acknowledgement of a link that is gone: the tag is
// being subscribed again on a new one.
func (t *Seq) ExpectAck() { t.acked = false }

// Relinked reconciles the sequence with the new link's acknowledgement
// (onAck came). When the publisher restarted, its sequences began again:
// what it published before the acknowledgement is missing (and what the
// old one published after the last message received, which the caller
// accounts for); otherwise what lies between the last message and the
// acknowledgement is.
func (t *Seq) Relinked(restarted bool) (first, n uint64) {
	if !t.acked {
		return 0, 0
	}
	switch {
	case restarted:
		first, n = 0, t.ack
	case t.known && t.ack > t.next:
		first, n = t.next, t.ack-t.next
	}
	t.next, t.known, t.awaiting = t.ack, true, false
	return first, n
}
