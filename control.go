package netio

import (
	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/ofi"
)

// controlSlots are the few small buffers a link sends header-only messages
// from (credit returns, FIN), apart from the data buffers, so that they can
// go out while every data buffer is in flight.
type controlSlots struct {
	region *ofi.Region
	size   int    // bytes per slot: a header and the largest payload
	busy   uint32 // a bit per slot: posted and not completed
	sent   uint64 // messages posted, for the heartbeats' send checks
	seg    [1]ofi.Segment
}

// ctlSlots is how many control messages may be in flight at once.
const ctlSlots = 4

// open makes the slots, each for a header and payload bytes.
func (c *controlSlots) open(d *ofi.Domain, payload int) (err error) {
	c.size = wire.HeaderSize + payload
	c.region, err = d.NewRegion(ctlSlots * c.size)
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

// freeLeavingOne returns a free slot when another stays free besides it.
func (c *controlSlots) freeLeavingOne() (int, bool) {
	slot, ok := c.free()
	if !ok {
		return 0, false
	}
	c.busy |= 1 << slot
	_, other := c.free()
	c.busy &^= 1 << slot
	return slot, other
}

// send posts a message of kind (with flags besides wire.FlagLast) and payload
// from slot, returning give credits.
func (c *controlSlots) send(ep *linkResources, slot int, kind, flags uint8, give uint16, payload []byte) error {
	return c.post(ep, slot, wire.Header{Kind: kind, Flags: wire.FlagLast | flags, Credits: give, MsgLen: uint64(len(payload))}, payload)
}

// post sends h, with fragLen set to the payload's length, and payload
// from slot.
func (c *controlSlots) post(ep *linkResources, slot int, h wire.Header, payload []byte) error {
	b := c.region.Bytes()[slot*c.size:]
	h.FragLen = uint32(len(payload))
	wire.PutHeader(b, h)
	copy(b[wire.HeaderSize:], payload)
	c.seg[0] = ofi.Segment{Offset: uint64(slot * c.size), Len: uint64(wire.HeaderSize + len(payload)), Token: tokCtl | uint64(slot)}
	if _, err := ep.postSend(c.region, c.seg[:], 0); err != nil {
		return err
	}
	c.busy |= 1 << slot
	c.sent++
	return nil
}

// inject sends the header h alone from slot with fi_inject, when it is
// at most inject bytes: the provider copies it in the call and reports no
// completion, so the slot stays free and the link need not be polled for
// it. It reports false, having sent nothing, when h does not fit.
func (c *controlSlots) inject(ep *linkResources, slot int, h wire.Header, inject int) (bool, error) {
	if wire.HeaderSize > inject {
		return false, nil
	}
	h.FragLen = 0
	wire.PutHeader(c.region.Bytes()[slot*c.size:], h)
	c.seg[0] = ofi.Segment{Offset: uint64(slot * c.size), Len: wire.HeaderSize, Token: tokCtl | uint64(slot)}
	if _, err := ep.postSend(c.region, c.seg[:], inject); err != nil {
		return false, err
	}
	c.sent++
	return true, nil
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
