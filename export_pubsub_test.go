package netio

import "github.com/netio-go/netio/internal/credit"

// PublisherStuck reports whether every subscriber of p has messages that
// wait to be sent and no credit to send them with: a subscriber that no
// longer runs (stopped) can never take them. What the subscribers sent
// before is read first.
func PublisherStuck(p *Publisher) bool {
	stuck := true
	p.eng.r.Call(func() {
		for _, pl := range *p.links.Load() {
			l := pl.l
			l.pollCQ()
			if l.tx.head.Load() == l.txPosted || l.credit.CanTake(credit.Data) {
				stuck = false
			}
		}
	})
	return stuck
}
