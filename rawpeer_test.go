package netio_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/ofi"
)

// Hand-made peers and the bytes they send: a raw peer (a bare libfabric
// endpoint), a raw listener, and plain TCP clients that speak netio's wire
// format and libfabric tcp's headers by hand, so that a test can send what
// a well-behaved netio never would.

// Wire constants, copied from the library (unexported there): message
// kinds, then the publish/subscribe ones.
const (
	wHeaderSize = 16
	wKindData   = 1
	wKindCredit = 2
	wKindFin    = 3
	wKindPage   = 4 // page.go: pages of records
	wFlagLast   = 1

	wKindTagged      = 5
	wKindSubscribe   = 16
	wKindUnsubscribe = 17
	wKindAck         = 18
)

// wHeader is one netio message header.
type wHeader struct {
	kind, flags uint8
	credits     uint16
	fragLen     uint32
	msgLen      uint64
}

func (h wHeader) bytes() []byte {
	b := make([]byte, wHeaderSize)
	b[0], b[1] = h.kind, h.flags
	binary.LittleEndian.PutUint16(b[2:], h.credits)
	binary.LittleEndian.PutUint32(b[4:], h.fragLen)
	binary.LittleEndian.PutUint64(b[8:], h.msgLen)
	return b
}

// dataMsg is a well-formed page holding one message.
func dataMsg(payload []byte) []byte {
	return rawPage(0, rawRecord(uint64(len(payload)), payload))
}

// helloBytes is the 24-byte netio handshake: "NTIO", version, 3 bytes of
// padding, window, buffer size and largest message, little-endian.
func helloBytes(version uint8, window, bufferSize uint32, maxMessage uint64) []byte {
	b := make([]byte, 24)
	copy(b, "NTIO")
	b[4] = version
	binary.LittleEndian.PutUint32(b[8:], window)
	binary.LittleEndian.PutUint32(b[12:], bufferSize)
	binary.LittleEndian.PutUint64(b[16:], maxMessage)
	return b
}

const (
	rawWindow  = 8
	rawBufSize = 4096
	rawTxSize  = 64 << 10
)

// rawPeer is one connected bare endpoint with its own fabric. It is used
// from one goroutine only, and makes progress only when polled.
type rawPeer struct {
	t        testing.TB
	infos    *ofi.InfoList
	fab      *ofi.Fabric
	eq       *ofi.EQ
	dom      *ofi.Domain
	cq       *ofi.CQ
	rx, tx   *ofi.Region
	ep       *ofi.Endpoint
	accept   []byte // the listener's handshake
	nextTok  uint64
	sent     map[uint64]bool // send tokens completed
	shutdown bool            // FI_SHUTDOWN seen
	cqErr    error
	cqBuf    [16]ofi.Completion
}

// dialRaw connects a bare endpoint to addr with hello as private data,
// sealed with the default key (a peer that holds the key), after posting
// rawWindow receive buffers of rawBufSize bytes. It returns the error
// event when the connection is refused.
func dialRaw(t testing.TB, addr string, hello []byte) (p *rawPeer, err error) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p = &rawPeer{t: t, nextTok: 1 << 32, sent: map[uint64]bool{}}
	peer := p
	defer func() {
		if err != nil {
			peer.close()
			p = nil
		}
	}()
	if p.infos, err = ofi.GetInfo(ofi.Hints{Provider: "tcp", Node: host, Service: port}); err != nil {
		t.Fatal(err)
	}
	info := p.infos.Entries[0]
	must := func(err error) {
		t.Helper()
		if err != nil {
			p.close()
			t.Fatal(err)
		}
	}
	p.fab, err = ofi.OpenFabric(info)
	must(err)
	p.eq, err = p.fab.OpenEQ(16)
	must(err)
	p.dom, err = p.fab.OpenDomain(info)
	must(err)
	p.cq, err = p.dom.OpenCQ(256)
	must(err)
	p.rx, err = p.dom.NewRegion(rawWindow * rawBufSize)
	must(err)
	p.tx, err = p.dom.NewRegion(rawTxSize)
	must(err)
	p.ep, err = p.dom.OpenEndpoint(info, 7)
	must(err)
	must(p.ep.BindEQ(p.eq))
	must(p.ep.BindCQ(p.cq))
	must(p.ep.Enable())
	segs := make([]ofi.Segment, rawWindow)
	for i := range segs {
		segs[i] = ofi.Segment{Offset: uint64(i * rawBufSize), Len: rawBufSize, Token: uint64(i)}
	}
	_, err = p.ep.PostRecv(p.rx, segs)
	must(err)
	must(p.ep.Connect(info, netio.SealedRequest(hello)))
	deadline := time.Now().Add(hangTimeout)
	var ev ofi.Event
	for {
		if time.Now().After(deadline) {
			p.close()
			t.Fatalf("raw peer: no answer to the connection request in %v", hangTimeout)
		}
		p.pollCQ()
		ok, err := p.eq.Read(&ev)
		must(err)
		if !ok {
			time.Sleep(100 * time.Microsecond) // polling pace: the raw peer has nothing to block on
			continue
		}
		switch ev.Kind {
		case ofi.EventConnected:
			p.accept = append([]byte(nil), ev.PrivateData()...)
			return p, nil
		case ofi.EventError:
			return nil, ev.Err
		case ofi.EventShutdown:
			return nil, errors.New("raw peer: FI_SHUTDOWN while connecting")
		}
	}
}

// pollCQ reads the completion queue once, which also drives the provider.
func (p *rawPeer) pollCQ() {
	for {
		n, err := p.cq.Read(p.cqBuf[:])
		if err != nil {
			var ce ofi.CompletionError
			if ok, _ := p.cq.ReadError(&ce); ok {
				if !errors.Is(&ce.AsyncError, ofi.ECANCELED) && p.cqErr == nil {
					p.cqErr = &ce.AsyncError
				}
				continue
			}
			return
		}
		for _, c := range p.cqBuf[:n] {
			if c.Token >= 1<<32 {
				p.sent[c.Token] = true
			}
		}
		if n < len(p.cqBuf) {
			return
		}
	}
}

// poll drives the peer once: completions and connection events.
func (p *rawPeer) poll() {
	p.pollCQ()
	var ev ofi.Event
	if ok, _ := p.eq.Read(&ev); ok && ev.Kind == ofi.EventShutdown {
		p.shutdown = true
	}
}

// send sends b as one libfabric message and waits for its completion.
func (p *rawPeer) send(b []byte) {
	p.t.Helper()
	if len(b) > rawTxSize {
		p.t.Fatalf("raw peer: %d bytes is more than the send region", len(b))
	}
	copy(p.tx.Bytes(), b)
	tok := p.nextTok
	p.nextTok++
	if _, err := p.ep.PostSend(p.tx, []ofi.Segment{{Offset: 0, Len: uint64(len(b)), Token: tok}}); err != nil {
		p.t.Fatalf("raw peer: fi_send: %v", err)
	}
	eventually(p.t, fmt.Sprintf("raw peer: the send of %d bytes completing", len(b)), func() bool {
		if p.cqErr != nil {
			p.t.Fatalf("raw peer: send of %d bytes failed: %v", len(b), p.cqErr)
		}
		p.poll()
		return p.sent[tok]
	})
}

// pumpUntil polls the peer until done is closed or the timeout passes,
// and reports whether done was closed.
func (p *rawPeer) pumpUntil(done <-chan struct{}, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-done:
			return true
		default:
		}
		if time.Now().After(deadline) {
			return false
		}
		p.poll()
		time.Sleep(50 * time.Microsecond) // polling pace: the raw peer has nothing to block on
	}
}

// close tears the peer down in libfabric's order.
func (p *rawPeer) close() {
	if p.ep != nil {
		p.ep.Close()
		p.ep = nil
	}
	if p.cq != nil {
		var ce ofi.CompletionError
		for i := 0; i < 1000; i++ {
			n, err := p.cq.Read(p.cqBuf[:])
			if err != nil {
				if ok, _ := p.cq.ReadError(&ce); ok {
					continue
				}
			}
			if n == 0 {
				break
			}
		}
		p.cq.Close()
		p.cq = nil
	}
	for _, r := range []**ofi.Region{&p.rx, &p.tx} {
		if *r != nil {
			(*r).Close()
			*r = nil
		}
	}
	if p.eq != nil {
		p.eq.Close()
		p.eq = nil
	}
	if p.dom != nil {
		p.dom.Close()
		p.dom = nil
	}
	if p.fab != nil {
		p.fab.Close()
		p.fab = nil
	}
	if p.infos != nil {
		p.infos.Free()
		p.infos = nil
	}
}

// rawListener is a bare passive endpoint that accepts every connection
// request with the given private data. One goroutine owns every libfabric
// object and polls them until stop.
type rawListener struct {
	addr string
	stop chan struct{}
	done chan struct{}
	reqs chan []byte // the private data of each request
}

func listenRaw(t testing.TB, accept []byte) *rawListener {
	t.Helper()
	infos, err := ofi.GetInfo(ofi.Hints{Provider: "tcp", Node: "127.0.0.1", Service: "0", Source: true})
	if err != nil {
		t.Fatal(err)
	}
	info := infos.Entries[0]
	fab, err := ofi.OpenFabric(info)
	if err != nil {
		infos.Free()
		t.Fatal(err)
	}
	eq, err := fab.OpenEQ(16)
	if err != nil {
		fab.Close()
		infos.Free()
		t.Fatal(err)
	}
	pep, err := fab.OpenPassiveEndpoint(info, 1)
	if err == nil {
		err = pep.Bind(eq)
	}
	if err == nil {
		err = pep.Listen()
	}
	var ap interface{ String() string }
	if err == nil {
		ap, err = pep.Addr()
	}
	if err != nil {
		if pep != nil {
			pep.Close()
		}
		eq.Close()
		fab.Close()
		infos.Free()
		t.Fatal(err)
	}
	l := &rawListener{addr: ap.String(), stop: make(chan struct{}), done: make(chan struct{}), reqs: make(chan []byte, 16)}
	go func() {
		defer close(l.done)
		type side struct {
			dom *ofi.Domain
			cq  *ofi.CQ
			ep  *ofi.Endpoint
		}
		var sides []side
		var ev ofi.Event
		var cqBuf [16]ofi.Completion
		for {
			select {
			case <-l.stop:
				for _, s := range sides {
					s.ep.Close()
					var ce ofi.CompletionError
					for i := 0; i < 100; i++ {
						if n, err := s.cq.Read(cqBuf[:]); err != nil {
							s.cq.ReadError(&ce)
						} else if n == 0 {
							break
						}
					}
					s.cq.Close()
					s.dom.Close()
				}
				pep.Close()
				eq.Close()
				fab.Close()
				infos.Free()
				return
			default:
			}
			for _, s := range sides {
				if _, err := s.cq.Read(cqBuf[:]); err != nil {
					var ce ofi.CompletionError
					s.cq.ReadError(&ce)
				}
			}
			ok, err := eq.Read(&ev)
			if err != nil || !ok {
				time.Sleep(50 * time.Microsecond) // polling pace: the raw listener has nothing to block on
				continue
			}
			if ev.Kind != ofi.EventConnReq {
				continue
			}
			select {
			case l.reqs <- append([]byte(nil), ev.PrivateData()...):
			default:
			}
			req := ev.Info
			var s side
			s.dom, err = fab.OpenDomain(req)
			if err != nil {
				pep.Reject(req, nil)
				continue
			}
			s.cq, _ = s.dom.OpenCQ(64)
			s.ep, err = s.dom.OpenEndpoint(req, 2)
			if err == nil {
				err = s.ep.BindEQ(eq)
			}
			if err == nil {
				err = s.ep.BindCQ(s.cq)
			}
			if err == nil {
				err = s.ep.Enable()
			}
			if err == nil {
				// A listener that holds the key proves it.
				err = s.ep.Accept(netio.SealedAccept(accept, ev.PrivateData()))
			}
			req.Free()
			sides = append(sides, s) // closed at stop
		}
	}()
	t.Cleanup(func() { close(l.stop); <-l.done })
	return l
}

// modeHello is helloBytes for a connection in mode m (byte 5).
func modeHello(m netio.Mode, window, bufferSize uint32, maxMessage uint64) []byte {
	b := helloBytes(netio.ProtocolLevel, window, bufferSize, maxMessage)
	b[5] = byte(m)
	return b
}

// rawPage is a page whose payload starts with cont bytes continuing the
// previous page's message; its header tells the truth about its length.
func rawPage(cont uint64, payload []byte) []byte {
	return append(wHeader{kind: wKindPage, fragLen: uint32(len(payload)), msgLen: cont}.bytes(), payload...)
}

// rawRecord is a record's length n followed by body, which may be shorter
// (the message goes on in the next page) or a lie.
func rawRecord(n uint64, body []byte) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, n), body...)
}

// rawRecords are whole records.
func rawRecords(msgs ...string) []byte {
	var b []byte
	for _, m := range msgs {
		b = append(b, rawRecord(uint64(len(m)), []byte(m))...)
	}
	return b
}

// tcpCMHeader is libfabric tcp's 32-byte connection-management header
// (struct ofi_ctrl_hdr): version 3, the message type, the private data's
// length big-endian, and conn_data 1 (same byte order).
func tcpCMHeader(msgType byte, data []byte) []byte {
	b := make([]byte, 32, 32+len(data))
	b[0], b[1] = 3, msgType
	binary.BigEndian.PutUint16(b[2:], uint16(len(data)))
	binary.LittleEndian.PutUint64(b[24:], 1)
	return append(b, data...)
}

// tcpDataHeader is libfabric tcp's 16-byte message header (struct
// tcpx_base_hdr): version 3, op, flags, op_data, rma_iov_cnt, hdr_size,
// id, and the message size including the header.
func tcpDataHeader(op, opData byte, size uint64) []byte {
	b := make([]byte, 16)
	b[0], b[1], b[4], b[6] = 3, op, opData, 16
	binary.LittleEndian.PutUint64(b[8:], size)
	return b
}

// tcpOpTagged is the provider's opcode for a tagged message, which crashed
// libfabric 1.17's tcp provider on an endpoint without a shared receive
// context (see ofi/guard.go).
const tcpOpTagged = 1

// defaultHello is netio's handshake for mode m with the LowLatency sizes.
func defaultHello(m netio.Mode) []byte { return modeHello(m, 16, 256<<10, 64<<20) }

// rawTCPRequest connects to addr as a plain TCP client that holds the
// default key, sends a valid connection request and waits for the
// listener's answer.
func rawTCPRequest(t *testing.T, addr string, m netio.Mode) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(tcpCMHeader(tcpCMConnReq, netio.SealedRequest(defaultHello(m)))); err != nil {
		t.Fatal(err)
	}
	resp := make([]byte, 32+netio.AcceptSize)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, resp); err != nil {
		t.Fatalf("reading the listener's answer: %v", err)
	}
	if resp[1] != tcpCMConnResp {
		t.Fatalf("listener answered with message type %d, want a connection response", resp[1])
	}
	c.SetReadDeadline(time.Time{})
	return c
}

// frame is a netio message with header h, its fragLen the payload's.
func frame(h wHeader, payload []byte) []byte {
	h.fragLen = uint32(len(payload))
	return append(h.bytes(), payload...)
}

// lying is a netio message with header h as given.
func lying(h wHeader, payload []byte) []byte { return append(h.bytes(), payload...) }

// request is a subscription request: id, policy, and tags.
func request(id uint32, policy byte, tags ...uint64) []byte {
	b := binary.LittleEndian.AppendUint32(nil, id)
	b = append(b, policy, 0, 0, 0)
	for _, tag := range tags {
		b = binary.LittleEndian.AppendUint64(b, tag)
	}
	return b
}

func control(kind uint8, payload []byte) []byte {
	return frame(wHeader{kind: kind, flags: wFlagLast, msgLen: uint64(len(payload))}, payload)
}

// tagged is a tagged page of whole records of tag.
func tagged(tag uint64, msgs ...string) []byte {
	var p []byte
	for i, m := range msgs {
		p = binary.LittleEndian.AppendUint64(p, uint64(len(m)))
		p = binary.LittleEndian.AppendUint64(p, tag)
		p = binary.LittleEndian.AppendUint64(p, uint64(i))
		p = append(p, m...)
	}
	return frame(wHeader{kind: wKindTagged}, p)
}
