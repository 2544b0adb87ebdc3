package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/netio-go/netio/ofi"
)

// The bare-libfabric rows drive netio's cgo binding (package ofi) directly,
// with no reactor: each process busy-polls its own completion queue, as
// fi_pingpong and NetIO's own benchmarks do. This is the native baseline,
// not something a Go user gets for free.

// ofiConn is one connected endpoint with its own queues and one registered
// region, in a process of its own.
type ofiConn struct {
	infos  []*ofi.InfoList
	fabric *ofi.Fabric
	domain *ofi.Domain
	eq     *ofi.EQ
	cq     *ofi.CQ
	region *ofi.Region
	ep     *ofi.Endpoint
	peer   []byte // private data from the peer
}

const ofiSetupTimeout = 30 * time.Second

func (c *ofiConn) open(info *ofi.Info, regionSize int) (err error) {
	if c.domain, err = c.fabric.OpenDomain(info); err != nil {
		return err
	}
	if c.eq, err = c.fabric.OpenEQ(64); err != nil {
		return err
	}
	if c.cq, err = c.domain.OpenCQ(1024); err != nil {
		return err
	}
	if c.region, err = c.domain.NewRegion(regionSize); err != nil {
		return err
	}
	if c.ep, err = c.domain.OpenEndpoint(info, 1); err != nil {
		return err
	}
	if err = c.ep.BindEQ(c.eq); err != nil {
		return err
	}
	if err = c.ep.BindCQ(c.cq); err != nil {
		return err
	}
	return c.ep.Enable()
}

// waitEvent polls q for one event of the wanted kind (progress is manual:
// nothing moves unless someone reads).
func waitEvent(q *ofi.EQ, want ofi.EventKind) (*ofi.Event, error) {
	ev := new(ofi.Event)
	deadline := time.Now().Add(ofiSetupTimeout)
	for time.Now().Before(deadline) {
		ok, err := q.Read(ev)
		if err != nil {
			return nil, err
		}
		if !ok {
			time.Sleep(50 * time.Microsecond)
			continue
		}
		switch ev.Kind {
		case want:
			return ev, nil
		case ofi.EventError:
			return nil, ev.Err
		default:
			return nil, fmt.Errorf("ofi: waiting for %v, got %v", want, ev.Kind)
		}
	}
	return nil, fmt.Errorf("ofi: no %v in %v", want, ofiSetupTimeout)
}

// ofiAccept listens on 127.0.0.1, announces the port and accepts one
// connection; prepare posts the first receives on the new endpoint before
// the accept (with the private data it returns), so the peer may send as
// soon as it is connected.
func ofiAccept(announce func(string), regionSize int, prepare func(c *ofiConn) ([]byte, error)) (*ofiConn, error) {
	c := &ofiConn{}
	li, err := ofi.GetInfo(ofi.Hints{Provider: "tcp", Node: "127.0.0.1", Service: "0", Source: true})
	if err != nil {
		return nil, err
	}
	c.infos = append(c.infos, li)
	info := li.Entries[0]
	if c.fabric, err = ofi.OpenFabric(info); err != nil {
		return nil, err
	}
	leq, err := c.fabric.OpenEQ(64)
	if err != nil {
		return nil, err
	}
	pep, err := c.fabric.OpenPassiveEndpoint(info, 9)
	if err != nil {
		return nil, err
	}
	if err := pep.Bind(leq); err != nil {
		return nil, err
	}
	if err := pep.Listen(); err != nil {
		return nil, err
	}
	addr, err := pep.Addr()
	if err != nil {
		return nil, err
	}
	announce(addr.String())
	ev, err := waitEvent(leq, ofi.EventConnReq)
	if err != nil {
		return nil, err
	}
	req := ev.Info
	c.peer = append([]byte(nil), ev.PrivateData()...)
	if err := c.open(req, regionSize); err != nil {
		pep.Reject(req, nil)
		return nil, err
	}
	data, err := prepare(c)
	if err != nil {
		pep.Reject(req, nil)
		return nil, err
	}
	err = c.ep.Accept(data)
	req.Free()
	if err != nil {
		return nil, err
	}
	if _, err := waitEvent(c.eq, ofi.EventConnected); err != nil {
		return nil, err
	}
	return c, nil
}

// ofiDial connects to addr; prepare posts receives before the request goes out.
func ofiDial(addr string, regionSize int, prepare func(c *ofiConn) error) (*ofiConn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	c := &ofiConn{}
	li, err := ofi.GetInfo(ofi.Hints{Provider: "tcp", Node: host, Service: port})
	if err != nil {
		return nil, err
	}
	c.infos = append(c.infos, li)
	info := li.Entries[0]
	if c.fabric, err = ofi.OpenFabric(info); err != nil {
		return nil, err
	}
	if err := c.open(info, regionSize); err != nil {
		return nil, err
	}
	if err := prepare(c); err != nil {
		return nil, err
	}
	if err := c.ep.Connect(info, nil); err != nil {
		return nil, err
	}
	ev, err := waitEvent(c.eq, ofi.EventConnected)
	if err != nil {
		return nil, err
	}
	c.peer = append([]byte(nil), ev.PrivateData()...)
	return c, nil
}

// poll reads a batch of completions; an error entry becomes the error.
func (c *ofiConn) poll(comps []ofi.Completion) (int, error) {
	n, err := c.cq.Read(comps)
	if err != nil {
		var ce ofi.CompletionError
		if ok, rerr := c.cq.ReadError(&ce); ok {
			return 0, &ce
		} else if rerr != nil {
			return 0, rerr
		}
	}
	return n, err
}

// ofiWindow is how many receive buffers the receiver posts, and so how
// many sends the sender may have in flight: 64 (as in the baselines'
// native runs), but at most 16 MiB of buffers.
func ofiWindow(size int) int { return max(16, min(64, (16<<20)/size)) }

// Stream protocol. The receiver posts W buffers of exactly one message and
// tells the sender W in the accept's private data. It re-posts each buffer
// as it takes the message out, and once it has re-posted W/2 since it last
// did, it sends the cumulative count of re-posted buffers as an 8-byte
// credit message. The sender keeps sent <= credit + W, so it never sends to
// a peer without a posted buffer (what verbs requires). Credits come at
// least W/2 apart and the sender can have caused at most W beyond the last
// one it read, so at most 2 are ever unread: the sender posts 4 buffers
// for them.
const (
	creditSlots = 4
	creditToken = 1 << 32
	pollBatch   = 64
)

func ofiReceiver(a *childArgs, announce func(string)) (*Result, error) {
	size := a.Size
	w := ofiWindow(size)
	creditOff := w * size
	segs := make([]ofi.Segment, 0, max(w, pollBatch))
	c, err := ofiAccept(announce, creditOff+creditSlots*8, func(c *ofiConn) ([]byte, error) {
		for i := 0; i < w; i++ {
			segs = append(segs, ofi.Segment{Offset: uint64(i * size), Len: uint64(size), Token: uint64(i)})
		}
		if _, err := c.ep.PostRecv(c.region, segs); err != nil {
			return nil, err
		}
		return binary.LittleEndian.AppendUint32(nil, uint32(w)), nil
	})
	if err != nil {
		return nil, err
	}
	mem := c.region.Bytes()
	freeCredit := []uint64{0, 1, 2, 3}
	reposted, lastCredit := 0, 0
	cnt := newCounter(a)
	comps := make([]ofi.Completion, pollBatch)
	credit := make([]ofi.Segment, 1)
	for done := false; ; {
		k, err := c.poll(comps)
		if err != nil {
			return nil, err
		}
		segs = segs[:0]
		for _, e := range comps[:k] {
			switch {
			case e.Flags&ofi.FlagRecv != 0:
				off := e.Token * uint64(size)
				d, err := cnt.got(mem[off : off+e.Len])
				if err != nil {
					return nil, err
				}
				done = done || d
				segs = append(segs, ofi.Segment{Offset: off, Len: uint64(size), Token: e.Token})
			case e.Flags&ofi.FlagSend != 0:
				freeCredit = append(freeCredit, e.Token-creditToken)
			}
		}
		if done {
			return cnt.result()
		}
		if len(segs) > 0 {
			if _, err := c.ep.PostRecv(c.region, segs); err != nil {
				return nil, err
			}
			reposted += len(segs)
		}
		if reposted-lastCredit >= w/2 && len(freeCredit) > 0 {
			slot := freeCredit[len(freeCredit)-1]
			freeCredit = freeCredit[:len(freeCredit)-1]
			off := uint64(creditOff) + slot*8
			binary.LittleEndian.PutUint64(mem[off:], uint64(reposted))
			credit[0] = ofi.Segment{Offset: off, Len: 8, Token: creditToken + slot}
			if _, err := c.ep.PostSend(c.region, credit); err != nil {
				return nil, err
			}
			lastCredit = reposted
		}
	}
}

func ofiSender(a *childArgs) (*Result, error) { return ofiSend(a, false) }

// ofiCopySender is ofiSender copying each message into its send slot from
// a buffer of its own before it posts it, as any API that takes the
// caller's bytes and returns before they are sent must (netio's Write,
// net.Conn's): bare libfabric's rate with the one copy that netio HT's
// Write makes, where ofiSender sends the same registered bytes over and
// over and writes only their sequence number.
func ofiCopySender(a *childArgs) (*Result, error) { return ofiSend(a, true) }

func ofiSend(a *childArgs, copied bool) (*Result, error) {
	size := a.Size
	w := ofiWindow(size)
	creditOff := w * size
	creditRecv := func(slot uint64) ofi.Segment {
		return ofi.Segment{Offset: uint64(creditOff) + slot*8, Len: 8, Token: creditToken + slot}
	}
	c, err := ofiDial(a.Addr, creditOff+creditSlots*8, func(c *ofiConn) error {
		segs := make([]ofi.Segment, creditSlots)
		for i := range segs {
			segs[i] = creditRecv(uint64(i))
		}
		_, err := c.ep.PostRecv(c.region, segs)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(c.peer) != 4 {
		return nil, errors.New("ofi: no window in the accept's private data")
	}
	pw := int(binary.LittleEndian.Uint32(c.peer)) // the receiver's window
	mem := c.region.Bytes()
	copy(mem, payload(creditOff))
	msg := payload(size)
	free := make([]uint64, 0, w) // send slots
	for i := w - 1; i >= 0; i-- {
		free = append(free, uint64(i))
	}
	limit := uint64(pw) // sends allowed in all: credit + window
	comps := make([]ofi.Completion, pollBatch)
	segs := make([]ofi.Segment, 0, w)
	rsegs := make([]ofi.Segment, 0, creditSlots)
	for seq := uint64(0); ; {
		segs = segs[:0]
		for seq < limit && len(free) > 0 {
			slot := free[len(free)-1]
			free = free[:len(free)-1]
			off := slot * uint64(size)
			if copied {
				binary.LittleEndian.PutUint64(msg, seq)
				copy(mem[off:off+uint64(size)], msg)
			} else {
				binary.LittleEndian.PutUint64(mem[off:], seq)
			}
			segs = append(segs, ofi.Segment{Offset: off, Len: uint64(size), Token: slot})
			seq++
		}
		if len(segs) > 0 {
			if _, err := c.ep.PostSend(c.region, segs); err != nil {
				return nil, err
			}
		}
		k, err := c.poll(comps)
		if err != nil {
			return nil, err
		}
		rsegs = rsegs[:0]
		for _, e := range comps[:k] {
			switch {
			case e.Flags&ofi.FlagRecv != 0:
				slot := e.Token - creditToken
				if v := binary.LittleEndian.Uint64(mem[uint64(creditOff)+slot*8:]) + uint64(pw); v > limit {
					limit = v
				}
				rsegs = append(rsegs, creditRecv(slot))
			case e.Flags&ofi.FlagSend != 0:
				free = append(free, e.Token)
			}
		}
		if len(rsegs) > 0 {
			if _, err := c.ep.PostRecv(c.region, rsegs); err != nil {
				return nil, err
			}
		}
	}
}

// Ping-pong: one receive posted on each side, re-posted as soon as it
// completes; sends from a separate slot, each completed before the next.
const (
	pingSendOff = 0
	pingRecvOff = 64 << 10
)

type pingSide struct {
	c     *ofiConn
	size  int
	comps []ofi.Completion
	seg   []ofi.Segment
	sends int // sends not yet completed
}

func (p *pingSide) postRecv() error {
	p.seg[0] = ofi.Segment{Offset: pingRecvOff, Len: uint64(p.size), Token: 1}
	_, err := p.c.ep.PostRecv(p.c.region, p.seg)
	return err
}

func (p *pingSide) send(msg []byte) error {
	for p.sends > 0 {
		if _, err := p.wait(false); err != nil {
			return err
		}
	}
	copy(p.c.region.Bytes()[pingSendOff:], msg)
	p.seg[0] = ofi.Segment{Offset: pingSendOff, Len: uint64(len(msg)), Token: 2}
	if _, err := p.c.ep.PostSend(p.c.region, p.seg); err != nil {
		return err
	}
	p.sends++
	return nil
}

// wait busy-polls until a message arrives (or, with forRecv false, until
// any completion), re-posts the receive and returns the message.
func (p *pingSide) wait(forRecv bool) ([]byte, error) {
	for {
		k, err := p.c.poll(p.comps)
		if err != nil {
			return nil, err
		}
		var msg []byte
		for _, e := range p.comps[:k] {
			if e.Flags&ofi.FlagSend != 0 {
				p.sends--
			} else if e.Flags&ofi.FlagRecv != 0 {
				msg = p.c.region.Bytes()[pingRecvOff : pingRecvOff+e.Len]
			}
		}
		if msg != nil {
			// The caller uses msg before the next receive can land: the
			// peer sends again only after it has our answer.
			return msg, p.postRecv()
		}
		if k > 0 && !forRecv {
			return nil, nil
		}
	}
}

func newPingSide(c *ofiConn, size int) *pingSide {
	return &pingSide{c: c, size: size, comps: make([]ofi.Completion, 8), seg: make([]ofi.Segment, 1)}
}

func ofiEcho(a *childArgs, announce func(string)) (*Result, error) {
	var p *pingSide
	c, err := ofiAccept(announce, 128<<10, func(c *ofiConn) ([]byte, error) {
		p = newPingSide(c, a.Size)
		return nil, p.postRecv()
	})
	if err != nil {
		return nil, err
	}
	p.c = c
	for {
		msg, err := p.wait(true)
		if err != nil {
			return nil, err
		}
		if err := p.send(msg); err != nil {
			return nil, err
		}
	}
}

func ofiPinger(a *childArgs) (*Result, error) {
	var p *pingSide
	c, err := ofiDial(a.Addr, 128<<10, func(c *ofiConn) error {
		p = newPingSide(c, a.Size)
		return p.postRecv()
	})
	if err != nil {
		return nil, err
	}
	p.c = c
	msg := payload(a.Size)
	return pinger(a, func(seq uint64) error {
		binary.LittleEndian.PutUint64(msg, seq)
		if err := p.send(msg); err != nil {
			return err
		}
		reply, err := p.wait(true)
		if err != nil {
			return err
		}
		return checkEcho(reply, a.Size, seq)
	})
}
