package main

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/netio-go/netio/ofi"
)

// The bare-libfabric rows on a reliable-datagram provider (shm): package
// ofi's RDM layer without netio, each process busy-polling its own
// completion queue, as the bare rows on tcp do. The server prints its
// endpoint's address; the client inserts it in its address vector and
// sends its own address first (tag rdmHelloTag), so the server can answer.

const (
	rdmDataTag   = 1
	rdmHelloTag  = 2
	rdmCreditTag = 3
	// rdmHelloMax bounds the client's address as text (fi_shm://pid:n:n).
	rdmHelloMax = 256
)

// rdmNode is one RDM endpoint with its own fabric, domain, queue, address
// vector and one registered region.
type rdmNode struct {
	list   *ofi.InfoList
	info   *ofi.Info
	fabric *ofi.Fabric
	domain *ofi.Domain
	cq     *ofi.RDMCQ
	av     *ofi.AV
	ep     *ofi.RDMEndpoint
	region *ofi.Region
	name   ofi.Address
	comps  [pollBatch]ofi.TaggedCompletion
	// held are completions read while a post waited, for the next poll.
	held []ofi.TaggedCompletion
}

// openRDMNode opens an endpoint on provider; the process exits without
// closing it (the parent kills the children), so nothing is closed here.
func openRDMNode(provider string, regionSize int) (n *rdmNode, err error) {
	n = &rdmNode{}
	if n.list, err = ofi.GetRDMInfo(ofi.RDMHints{Provider: provider}); err != nil {
		if errors.Is(err, ofi.ENODATA) {
			return nil, fmt.Errorf("libfabric here has no %s provider: %w", provider, err)
		}
		return nil, err
	}
	n.info = n.list.Entries[0]
	if n.fabric, err = ofi.OpenFabric(n.info); err != nil {
		return nil, err
	}
	if n.domain, err = n.fabric.OpenDomain(n.info); err != nil {
		return nil, err
	}
	if n.cq, err = n.domain.OpenRDMCQ(1024, 256); err != nil {
		return nil, err
	}
	if n.av, err = n.domain.OpenAV(n.info, 16); err != nil {
		return nil, err
	}
	if n.ep, err = n.domain.OpenRDMEndpoint(n.info, n.cq, n.av); err != nil {
		return nil, err
	}
	if n.region, err = n.domain.NewRegion(regionSize); err != nil {
		return nil, err
	}
	if err = n.ep.BindRegion(n.region); err != nil {
		return nil, err
	}
	if n.name, err = n.ep.Name(); err != nil {
		return nil, err
	}
	return n, nil
}

// poll returns the completions held by a post, or else those the queue
// holds now (valid until the next poll).
func (n *rdmNode) poll() ([]ofi.TaggedCompletion, error) {
	if len(n.held) > 0 {
		k := copy(n.comps[:], n.held)
		n.held = append(n.held[:0], n.held[k:]...)
		return n.comps[:k], nil
	}
	return n.read()
}

func (n *rdmNode) read() ([]ofi.TaggedCompletion, error) {
	k, err := n.cq.Read(n.comps[:])
	if errors.Is(err, ofi.EAVAIL) {
		var e ofi.TaggedCompletionError
		if _, rerr := n.cq.ReadError(&e); rerr != nil {
			return nil, rerr
		}
		return nil, fmt.Errorf("completion error: %v (token %d)", &e, e.Token)
	}
	return n.comps[:k], err
}

// post posts one receive or send; see postAll.
func (n *rdmNode) post(send bool, seg ofi.RDMSegment) error {
	return n.postAll(send, []ofi.RDMSegment{seg})
}

// postAll posts receives or sends (those within the inject size without
// a completion), reading the queue while the provider answers EAGAIN (the
// first send to a new peer waits for shm to map it); what it reads, the
// next poll returns.
func (n *rdmNode) postAll(send bool, segs []ofi.RDMSegment) error {
	for {
		var k int
		var err error
		if send {
			k, err = n.ep.PostTaggedSend(n.region, segs, n.info.InjectSize())
		} else {
			k, err = n.ep.PostTaggedRecv(n.region, segs)
		}
		if segs = segs[k:]; len(segs) == 0 {
			return nil
		}
		if err != nil && !errors.Is(err, ofi.EAGAIN) {
			return err
		}
		comps, err := n.read()
		if err != nil {
			return err
		}
		n.held = append(n.held, comps...)
	}
}

// ofiRDMEcho answers each 64 B message with its bytes, as ofiEcho does.
func ofiRDMEcho(provider string) func(*childArgs, func(string)) (*Result, error) {
	return func(a *childArgs, announce func(string)) (*Result, error) {
		n, err := openRDMNode(provider, 8192)
		if err != nil {
			return nil, err
		}
		const helloAt = 4096
		if err := n.post(false, ofi.RDMSegment{Offset: helloAt, Len: rdmHelloMax, Token: 2, Tag: rdmHelloTag, Peer: ofi.AddrUnspec}); err != nil {
			return nil, err
		}
		recv := ofi.RDMSegment{Len: uint64(a.Size), Token: 1, Tag: rdmDataTag, Peer: ofi.AddrUnspec}
		if err := n.post(false, recv); err != nil {
			return nil, err
		}
		announce(n.name.String())
		peer := ofi.AddrNotAvail
		for {
			comps, err := n.poll()
			if err != nil {
				return nil, err
			}
			for _, c := range comps {
				switch {
				case c.Flags&ofi.FlagRecv == 0:
				case c.Tag == rdmHelloTag:
					addr, err := ofi.ParseAddress(string(n.region.Bytes()[helloAt : helloAt+c.Len]))
					if err != nil {
						return nil, err
					}
					if peer, err = n.av.Insert(addr); err != nil {
						return nil, err
					}
				case peer == ofi.AddrNotAvail:
					return nil, errors.New("a message before the client's address")
				default:
					// Injected: the bytes are copied out before the post
					// returns, so the buffer can take the next message.
					if err := n.post(true, ofi.RDMSegment{Len: c.Len, Tag: rdmDataTag, Peer: peer}); err != nil {
						return nil, err
					}
					if err := n.post(false, recv); err != nil {
						return nil, err
					}
				}
			}
		}
	}
}

// ofiRDMPinger sends 64 B from one buffer and waits for the echo in
// another, busy-polling.
func ofiRDMPinger(provider string) func(*childArgs) (*Result, error) {
	return func(a *childArgs) (*Result, error) {
		n, err := openRDMNode(provider, 8192)
		if err != nil {
			return nil, err
		}
		if a.Size > n.info.InjectSize() {
			return nil, fmt.Errorf("%d B above the inject size, %d B", a.Size, n.info.InjectSize())
		}
		addr, err := ofi.ParseAddress(a.Addr)
		if err != nil {
			return nil, err
		}
		peer, err := n.av.Insert(addr)
		if err != nil {
			return nil, err
		}
		const helloAt, sendAt = 4096, 6144
		mem := n.region.Bytes()
		hello := copy(mem[helloAt:helloAt+rdmHelloMax], n.name.String())
		recv := ofi.RDMSegment{Len: uint64(a.Size), Token: 1, Tag: rdmDataTag, Peer: ofi.AddrUnspec}
		if err := n.post(false, recv); err != nil {
			return nil, err
		}
		if err := n.post(true, ofi.RDMSegment{Offset: helloAt, Len: uint64(hello), Tag: rdmHelloTag, Peer: peer}); err != nil {
			return nil, err
		}
		msg := mem[sendAt : sendAt+a.Size]
		copy(msg, payload(a.Size))
		send := ofi.RDMSegment{Offset: sendAt, Len: uint64(a.Size), Tag: rdmDataTag, Peer: peer}
		return pinger(a, func(seq uint64) error {
			binary.LittleEndian.PutUint64(msg, seq)
			if err := n.post(true, send); err != nil {
				return err
			}
			for {
				comps, err := n.poll()
				if err != nil {
					return err
				}
				for _, c := range comps {
					if c.Flags&ofi.FlagRecv != 0 {
						if err := checkEcho(mem[:c.Len], a.Size, seq); err != nil {
							return err
						}
						return n.post(false, recv)
					}
				}
			}
		})
	}
}

// Stream protocol on RDM: that of the bare rows on tcp (see ofiReceiver),
// with the window known to both sides (ofiWindow of the size) instead of
// sent in the accept, the credits tagged rdmCreditTag and sent injected,
// and the client's address as its first message.

func ofiRDMReceiver(provider string) func(*childArgs, func(string)) (*Result, error) {
	return func(a *childArgs, announce func(string)) (*Result, error) {
		size := a.Size
		w := ofiWindow(size)
		helloOff, creditOff := w*size, w*size+rdmHelloMax
		n, err := openRDMNode(provider, creditOff+8)
		if err != nil {
			return nil, err
		}
		if uint64(size) > n.info.MaxMsgSize() {
			return nil, fmt.Errorf("%d B above the provider's largest message, %d B", size, n.info.MaxMsgSize())
		}
		if 8 > n.info.InjectSize() {
			return nil, errors.New("credits above the inject size")
		}
		if err := n.post(false, ofi.RDMSegment{Offset: uint64(helloOff), Len: rdmHelloMax, Token: creditToken, Tag: rdmHelloTag, Peer: ofi.AddrUnspec}); err != nil {
			return nil, err
		}
		segs := make([]ofi.RDMSegment, 0, max(w, pollBatch))
		for i := 0; i < w; i++ {
			segs = append(segs, ofi.RDMSegment{Offset: uint64(i * size), Len: uint64(size), Token: uint64(i), Tag: rdmDataTag, Peer: ofi.AddrUnspec})
		}
		if err := n.postAll(false, segs); err != nil {
			return nil, err
		}
		announce(n.name.String())
		mem := n.region.Bytes()
		peer := ofi.AddrNotAvail
		reposted, lastCredit := 0, 0
		cnt := newCounter(a)
		for done := false; ; {
			comps, err := n.poll()
			if err != nil {
				return nil, err
			}
			segs = segs[:0]
			for _, e := range comps {
				switch {
				case e.Flags&ofi.FlagRecv == 0:
				case e.Tag == rdmHelloTag:
					addr, err := ofi.ParseAddress(string(mem[helloOff : helloOff+int(e.Len)]))
					if err != nil {
						return nil, err
					}
					if peer, err = n.av.Insert(addr); err != nil {
						return nil, err
					}
				default:
					off := e.Token * uint64(size)
					d, err := cnt.got(mem[off : off+e.Len])
					if err != nil {
						return nil, err
					}
					done = done || d
					segs = append(segs, ofi.RDMSegment{Offset: off, Len: uint64(size), Token: e.Token, Tag: rdmDataTag, Peer: ofi.AddrUnspec})
				}
			}
			if done {
				return cnt.result()
			}
			if len(segs) > 0 {
				if err := n.postAll(false, segs); err != nil {
					return nil, err
				}
				reposted += len(segs)
			}
			if reposted-lastCredit >= w/2 && peer != ofi.AddrNotAvail {
				binary.LittleEndian.PutUint64(mem[creditOff:], uint64(reposted))
				if err := n.post(true, ofi.RDMSegment{Offset: uint64(creditOff), Len: 8, Tag: rdmCreditTag, Peer: peer}); err != nil {
					return nil, err
				}
				lastCredit = reposted
			}
		}
	}
}

func ofiRDMSender(provider string) func(*childArgs) (*Result, error) {
	return func(a *childArgs) (*Result, error) {
		size := a.Size
		w := ofiWindow(size)
		helloOff, creditOff := w*size, w*size+rdmHelloMax
		n, err := openRDMNode(provider, creditOff+creditSlots*8)
		if err != nil {
			return nil, err
		}
		addr, err := ofi.ParseAddress(a.Addr)
		if err != nil {
			return nil, err
		}
		peer, err := n.av.Insert(addr)
		if err != nil {
			return nil, err
		}
		mem := n.region.Bytes()
		copy(mem, payload(w*size))
		creditRecv := func(slot uint64) ofi.RDMSegment {
			return ofi.RDMSegment{Offset: uint64(creditOff) + slot*8, Len: 8, Token: creditToken + slot, Tag: rdmCreditTag, Peer: ofi.AddrUnspec}
		}
		for i := range uint64(creditSlots) {
			if err := n.post(false, creditRecv(i)); err != nil {
				return nil, err
			}
		}
		hello := copy(mem[helloOff:helloOff+rdmHelloMax], n.name.String())
		if err := n.post(true, ofi.RDMSegment{Offset: uint64(helloOff), Len: uint64(hello), Tag: rdmHelloTag, Peer: peer}); err != nil {
			return nil, err
		}
		// Messages within the inject size are copied out as they are
		// posted and complete silently: their slot is free at once.
		injected := size <= n.info.InjectSize()
		free := make([]uint64, 0, w) // send slots
		for i := w - 1; i >= 0; i-- {
			free = append(free, uint64(i))
		}
		limit := uint64(w) // sends allowed in all: credit + window
		segs := make([]ofi.RDMSegment, 0, w)
		for seq := uint64(0); ; {
			segs = segs[:0]
			for seq < limit && len(free) > 0 {
				slot := free[len(free)-1]
				free = free[:len(free)-1]
				off := slot * uint64(size)
				binary.LittleEndian.PutUint64(mem[off:], seq)
				segs = append(segs, ofi.RDMSegment{Offset: off, Len: uint64(size), Token: slot, Tag: rdmDataTag, Peer: peer})
				seq++
			}
			if len(segs) > 0 {
				if err := n.postAll(true, segs); err != nil {
					return nil, err
				}
				if injected {
					for _, s := range segs {
						free = append(free, s.Token)
					}
				}
			}
			comps, err := n.poll()
			if err != nil {
				return nil, err
			}
			for _, e := range comps {
				switch {
				case e.Flags&ofi.FlagRecv != 0 && e.Tag == rdmCreditTag:
					slot := e.Token - creditToken
					off := uint64(creditOff) + slot*8
					limit = max(limit, binary.LittleEndian.Uint64(mem[off:])+uint64(w))
					if err := n.post(false, creditRecv(slot)); err != nil {
						return nil, err
					}
				case e.Flags&ofi.FlagSend != 0 && e.Token < creditToken:
					free = append(free, e.Token)
				}
			}
		}
	}
}
