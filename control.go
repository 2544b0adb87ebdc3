package netio

import "github.com/netio-go/netio/ofi"

// controlSlots are the few small buffers a link sends header-only messages
// from (credit returns, FIN), apart from the data buffers, so that they can
// go out while every data buffer is in flight.
type controlSlots struct {
	region *ofi.Region
	busy   uint32 // a bit per slot: posted and not completed
	seg    [1]ofi.Segment
}

// ctlSlots is how many control messages may be in flight at once.
const ctlSlots = 4

func (c *controlSlots) open(d *ofi.Domain) (err error) {
	c.region, err = d.NewRegion(ctlSlots * headerSize)
	return err
}

// free returns a slot not in flight.
func (c *controlSlots) free() (int, bool) {
	for i := 0; i < ctlSlots; i++ {
		if c.busy&(1<<i) == 0 {
			return i, true
		}
	}
	return 0, false
}

// send posts a message of kind from slot, returning give credits.
func (c *controlSlots) send(ep *ofi.Endpoint, slot int, kind uint8, give uint16) error {
	putHeader(c.region.Bytes()[slot*headerSize:], header{kind: kind, flags: flagLast, credits: give})
	c.seg[0] = ofi.Segment{Offset: uint64(slot * headerSize), Len: headerSize, Token: tokCtl | uint64(slot)}
	if _, err := ep.PostSend(c.region, c.seg[:]); err != nil {
		return err
	}
	c.busy |= 1 << slot
	return nil
}

// done is slot's send completed.
func (c *controlSlots) done(slot uint32) {
	if slot < ctlSlots {
		c.busy &^= 1 << slot
	}
}

// idle reports whether no control message is in flight.
func (c *controlSlots) idle() bool { return c.busy == 0 }

func (c *controlSlots) close() {
	if c.region != nil {
		c.region.Close()
		c.region = nil
	}
}
