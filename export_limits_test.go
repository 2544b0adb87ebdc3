package netio

import (
	"github.com/netio-go/netio/internal/wire"
)

// StallSetups makes the next n connections ln accepts never hear that
// their handshake completed, as with a verbs peer that never sends its
// last message: each one's events are dropped from the moment it is
// made, and only the set-up deadline ends it.
func StallSetups(ln *Listener, n int) {
	ln.eng.r.Call(func() { ln.ac.owner = &stallOwner{ln.ac.owner, ln.ac, n} })
}

type stallOwner struct {
	acceptorOwner
	a *acceptor
	n int
}

func (s *stallOwner) admit(req *peerRequest, h wire.Hello) []byte {
	e := s.a.eng
	first := e.nextToken + 1
	reject := s.acceptorOwner.admit(req, h)
	for t := first; t <= e.nextToken && s.n > 0; t++ {
		if _, ok := e.targets[t].(*link); ok {
			delete(e.targets, t)
			s.n--
		}
	}
	return reject
}
