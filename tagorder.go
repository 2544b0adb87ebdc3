package netio

import (
	"github.com/netio-go/netio/internal/tagseq"
	tagturn "github.com/netio-go/netio/internal/turn"
)

// A tag's messages arrive in order, and a gap is never silent: at the
// publisher, the Publish that holds the tag's turn numbers its next message
// (internal/turn); at a subscriber, the dispatcher checks the tag's
// sequence (internal/tagseq). Here they are under the names the publisher
// and the dispatcher call them by; the conversions cost nothing.

// turn is a tag's place in line at a publisher.
type turn tagturn.Turn

func (t *turn) lock(done <-chan struct{}) bool { return (*tagturn.Turn)(t).Lock(done) }
func (t *turn) unlock()                        { (*tagturn.Turn)(t).Unlock() }

// tagSeq is one tag's sequence at a subscriber's dispatcher.
type tagSeq tagseq.Seq

func newTagSeq() tagSeq { return tagSeq(tagseq.New()) }

func (t *tagSeq) onAck(next uint64)                          { (*tagseq.Seq)(t).OnAck(next) }
func (t *tagSeq) take(seq uint64) (ok bool, first, n uint64) { return (*tagseq.Seq)(t).Take(seq) }
func (t *tagSeq) final(next uint64) (first, n uint64)        { return (*tagseq.Seq)(t).Final(next) }
func (t *tagSeq) expectAck()                                 { (*tagseq.Seq)(t).ExpectAck() }
func (t *tagSeq) relinked(restarted bool) (first, n uint64) {
	return (*tagseq.Seq)(t).Relinked(restarted)
}
