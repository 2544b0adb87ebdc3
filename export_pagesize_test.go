package netio

// InReceiveBuffer reports whether m lies in the receive buffer its bytes
// arrived in (NextMessage lent it), rather than in memory its pieces were
// joined into: for the tests of messages as large as a page.
func InReceiveBuffer(m Message) bool { return m.recv() != nil && m.slot >= 0 }
