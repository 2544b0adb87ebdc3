package netio

// RDMListenerSetup reports what ln's reliable-datagram endpoint holds for
// connection set-up: its links, the set-up messages waiting for the
// provider to take them, and the set-up send buffers taken.
func RDMListenerSetup(ln *Listener) (links, waiting, busy int) {
	ln.eng.r.Call(func() {
		p := ln.ac.rdm
		links, waiting = len(p.links), len(p.helloOut)
		for _, b := range p.helloBusy {
			if b {
				busy++
			}
		}
	})
	return links, waiting, busy
}
