//go:build cgo && linux

package ofi_test

import (
	"bytes"
	"errors"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netio-go/netio/internal/leakcheck"
	"github.com/netio-go/netio/internal/ofipair"
	"github.com/netio-go/netio/ofi"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// hangTimeout bounds the polling loops: a guard against a hang, not a
// measure of speed (completions on loopback take microseconds).
const hangTimeout = 20 * time.Second

func TestGetInfoListen(t *testing.T) {
	l, err := ofi.GetInfo(ofi.Hints{Provider: "tcp", Node: "127.0.0.1", Service: "0", Source: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Free()
	i := l.Entries[0]
	if got := i.Provider(); got != "tcp" {
		t.Errorf("provider %q, want tcp", got)
	}
	if a, ok := i.SourceAddr(); !ok || a.Addr().String() != "127.0.0.1" {
		t.Errorf("source address %v %v, want 127.0.0.1", a, ok)
	}
	if i.TxSize() <= 0 || i.RxSize() <= 0 {
		t.Errorf("tx %d rx %d", i.TxSize(), i.RxSize())
	}
	if i.Spins() {
		t.Errorf("Debian's tcp %v reported as spinning", i.ProviderVersion())
	}
	if !strings.Contains(i.String(), "FI_EP_MSG") {
		t.Errorf("fi_tostr lacks FI_EP_MSG:\n%s", i.String())
	}
}

func TestGetInfoErrors(t *testing.T) {
	_, err := ofi.GetInfo(ofi.Hints{Provider: "no-such-provider", Node: "127.0.0.1", Service: "0", Source: true})
	if !errors.Is(err, ofi.ENODATA) {
		t.Errorf("unknown provider: %v, want ENODATA", err)
	}
	_, err = ofi.GetInfo(ofi.Hints{Provider: "tcp", Node: "no-such-host.invalid", Service: "1"})
	if err == nil {
		t.Error("bad host name resolved")
	}
	var oe *ofi.Error
	if !errors.As(err, &oe) || oe.Op != "fi_getinfo" {
		t.Errorf("error %v is not an *ofi.Error from fi_getinfo", err)
	}
}

func TestSpinningProviderRefused(t *testing.T) {
	// Debian 12 ships the 'net' provider of 1.17, which never lets a thread sleep.
	_, err := ofi.GetInfo(ofi.Hints{Provider: "net", Node: "127.0.0.1", Service: "0", Source: true})
	if ofi.LibraryVersion() < ofi.MakeVersion(1, 19) && !errors.Is(err, ofi.ErrSpinningProvider) && !errors.Is(err, ofi.ENODATA) {
		t.Errorf("net provider of %v: %v, want ErrSpinningProvider", ofi.LibraryVersion(), err)
	}
}

func TestErrnoIs(t *testing.T) {
	err := error(&ofi.Error{Op: "fi_connect", Err: ofi.ECONNREFUSED})
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Error("ECONNREFUSED does not match syscall.ECONNREFUSED")
	}
	if errors.Is(error(ofi.ETRUNC), syscall.Errno(ofi.ETRUNC)) {
		t.Error("a libfabric-only errno matched a POSIX errno")
	}
	if !strings.Contains(ofi.ETRUNC.Error(), "runcat") {
		t.Errorf("ETRUNC text %q", ofi.ETRUNC.Error())
	}
}

func TestPassiveEndpointPortZero(t *testing.T) {
	p, err := ofipair.New(ofipair.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.ServerAddr.Port() == 0 {
		t.Fatal("port 0 was not replaced by the bound port")
	}
	// The bound port is really taken: a second listener on it fails.
	l, err := ofi.GetInfo(ofi.Hints{Provider: "tcp", Node: "127.0.0.1", Service: strconv.Itoa(int(p.ServerAddr.Port())), Source: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Free()
	pep, err := p.Fabric.OpenPassiveEndpoint(l.Entries[0], 9)
	if err == nil {
		pep.Close()
		t.Fatal("second passive endpoint on a busy port succeeded")
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("busy port: %v, want EADDRINUSE", err)
	}
}

func TestSendRecvBatch(t *testing.T) {
	const n, size = 32, 4096
	var recvs []ofi.Segment
	for i := 0; i < n; i++ {
		recvs = append(recvs, ofi.Segment{Offset: uint64(i * size), Len: size, Token: uint64(1000 + i)})
	}
	p, err := ofipair.New(ofipair.Options{ServerRecv: recvs, ClientData: []byte("hello"), ServerData: []byte("welcome")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if string(p.ClientData) != "hello" || string(p.ServerData) != "welcome" {
		t.Errorf("private data: server got %q, client got %q", p.ClientData, p.ServerData)
	}
	mem := p.Client.Region.Bytes()
	var sends []ofi.Segment
	for i := 0; i < n; i++ {
		msg := mem[i*size : i*size+100+i]
		for j := range msg {
			msg[j] = byte(i + j)
		}
		sends = append(sends, ofi.Segment{Offset: uint64(i * size), Len: uint64(len(msg)), Token: uint64(i)})
	}
	if k, err := p.Client.Endpoint.PostSend(p.Client.Region, sends); k != n || err != nil {
		t.Fatalf("PostSend: %d, %v", k, err)
	}
	got := make([]ofi.Completion, n)
	sent := make([]ofi.Completion, n)
	// Manual progress: both sides are polled until everything completed.
	deadline := time.Now().Add(hangTimeout)
	var ns, nr int
	for (ns < n || nr < n) && time.Now().Before(deadline) {
		k, err := p.Client.CQ.Read(sent[ns:])
		if err != nil {
			t.Fatal(err)
		}
		ns += k
		k, err = p.Server.CQ.Read(got[nr:])
		if err != nil {
			t.Fatal(err)
		}
		nr += k
	}
	if ns != n || nr != n {
		t.Fatalf("%d sends and %d receives completed, want %d", ns, nr, n)
	}
	for i, c := range got {
		if c.Token != uint64(1000+i) || c.Len != uint64(100+i) || c.Flags&ofi.FlagRecv == 0 {
			t.Fatalf("completion %d: %+v", i, c)
		}
		want := mem[i*size : i*size+100+i]
		if b := p.Server.Region.Bytes()[i*size : i*size+int(c.Len)]; !bytes.Equal(b, want) {
			t.Fatalf("message %d corrupted", i)
		}
	}
	for i, c := range sent {
		if c.Token != uint64(i) || c.Flags&ofi.FlagSend == 0 {
			t.Fatalf("send completion %d: %+v", i, c)
		}
	}
}

func TestSegmentOutsideRegion(t *testing.T) {
	p, err := ofipair.New(ofipair.Options{RegionSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Client.Endpoint.PostSend(p.Client.Region, []ofi.Segment{{Offset: 4000, Len: 200}}); err == nil {
		t.Fatal("a send past the end of its region was posted")
	}
}

func TestTruncatedReceive(t *testing.T) {
	p, err := ofipair.New(ofipair.Options{ServerRecv: []ofi.Segment{{Offset: 0, Len: 16, Token: 7}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Client.Endpoint.PostSend(p.Client.Region, []ofi.Segment{{Len: 64}}); err != nil {
		t.Fatal(err)
	}
	var buf [4]ofi.Completion
	deadline := time.Now().Add(hangTimeout)
	for time.Now().Before(deadline) {
		p.Client.CQ.Read(buf[:])
		_, err := p.Server.CQ.Read(buf[:])
		if err == nil {
			continue
		}
		if !errors.Is(err, ofi.EAVAIL) {
			t.Fatalf("Read: %v, want EAVAIL", err)
		}
		var ce ofi.CompletionError
		ok, err := p.Server.CQ.ReadError(&ce)
		if !ok || err != nil {
			t.Fatalf("ReadError: %v %v", ok, err)
		}
		if ce.Token != 7 || !errors.Is(&ce.AsyncError, ofi.ETRUNC) {
			t.Fatalf("error entry %+v, want token 7 and ETRUNC", ce)
		}
		return
	}
	t.Fatal("no truncation error")
}

func TestConnectRefused(t *testing.T) {
	// Find a port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	l, err := ofi.GetInfo(ofi.Hints{Provider: "tcp", Node: "127.0.0.1", Service: strconv.Itoa(port)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Free()
	f, err := ofi.OpenFabric(l.Entries[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := f.OpenDomain(l.Entries[0])
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	eq, err := f.OpenEQ(8)
	if err != nil {
		t.Fatal(err)
	}
	defer eq.Close()
	cq, err := d.OpenCQ(8)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	ep, err := d.OpenEndpoint(l.Entries[0], 42)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	for _, err := range []error{ep.BindEQ(eq), ep.BindCQ(cq), ep.Enable(), ep.Connect(l.Entries[0], []byte("x"))} {
		if err != nil {
			t.Fatal(err)
		}
	}
	var ev ofi.Event
	deadline := time.Now().Add(hangTimeout)
	for time.Now().Before(deadline) {
		ok, err := eq.Read(&ev)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			time.Sleep(time.Millisecond) // polling pace: the event queue is read without blocking
			continue
		}
		if ev.Kind != ofi.EventError || ev.Context != 42 || !errors.Is(ev.Err, syscall.ECONNREFUSED) {
			t.Fatalf("event %v ctx %d err %v, want a refused error for token 42", ev.Kind, ev.Context, ev.Err)
		}
		return
	}
	t.Fatal("no event for a refused connection")
}

func TestShutdownEvent(t *testing.T) {
	p, err := ofipair.New(ofipair.Options{ServerRecv: []ofi.Segment{{Len: 64, Token: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Client.Endpoint.Shutdown(); err != nil {
		t.Fatal(err)
	}
	var ev ofi.Event
	var buf [4]ofi.Completion
	var ce ofi.CompletionError
	deadline := time.Now().Add(hangTimeout)
	for time.Now().Before(deadline) {
		// FI_SHUTDOWN appears on the EQ only once the CQ has been read.
		if _, err := p.Server.CQ.Read(buf[:]); err != nil {
			p.Server.CQ.ReadError(&ce)
		}
		ok, err := p.Server.EQ.Read(&ev)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if ev.Kind != ofi.EventShutdown || ev.Context != 3 {
				t.Fatalf("event %v for %d, want FI_SHUTDOWN for the server endpoint (3)", ev.Kind, ev.Context)
			}
			return
		}
	}
	t.Fatal("no FI_SHUTDOWN")
}

func TestTryWait(t *testing.T) {
	p, err := ofipair.New(ofipair.Options{ServerRecv: []ofi.Segment{{Len: 64, Token: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var w ofi.WaitList
	w.Add(p.Server.CQ)
	w.Add(p.Server.EQ)
	if w.Len() != 2 {
		t.Fatalf("Len %d", w.Len())
	}
	if _, err := p.Fabric.TryWait(&w); err != nil {
		t.Fatal(err)
	}
	if p.Server.CQ.FD() < 0 || p.Server.EQ.FD() < 0 {
		t.Fatal("no wait fds")
	}
	// Once something arrives, trywait must refuse to let us sleep until read.
	if _, err := p.Client.Endpoint.PostSend(p.Client.Region, []ofi.Segment{{Len: 8}}); err != nil {
		t.Fatal(err)
	}
	var buf [4]ofi.Completion
	if _, err := p.Client.Poll(buf[:], 1, hangTimeout); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Server.Poll(buf[:], 1, hangTimeout); err != nil {
		t.Fatal(err)
	}
	w.Reset()
	w.Add(p.Server.CQ)
	ok, err := p.Fabric.TryWait(&w)
	if err != nil || !ok {
		t.Fatalf("TryWait on a drained queue: %v %v", ok, err)
	}
}

// RegionsResident counts a region's pages as they are written, and forgets
// the region when it is closed.
func TestRegionsResident(t *testing.T) {
	p, err := ofipair.New(ofipair.Options{RegionSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, mapped := ofi.RegionsResident()
	page := os.Getpagesize()
	r, err := p.Client.Domain.NewRegion(64 * page)
	if err != nil {
		t.Fatal(err)
	}
	res0, mapped1 := ofi.RegionsResident()
	if mapped1 != mapped+uint64(64*page) {
		t.Fatalf("mapped %d after a region of %d, was %d", mapped1, 64*page, mapped)
	}
	b := r.Bytes()
	for i := 0; i < 10; i++ {
		b[i*page] = 1
	}
	res1, _ := ofi.RegionsResident()
	if res1 < res0+uint64(10*page) {
		t.Fatalf("resident %d after writing 10 pages, was %d", res1, res0)
	}
	r.Close()
	if _, m := ofi.RegionsResident(); m != mapped {
		t.Fatalf("mapped %d after Close, want %d", m, mapped)
	}
}

// CHeapInUse sees what libfabric allocates for a connected pair, and sees it
// given back when the pair is closed.
func TestCHeapInUse(t *testing.T) {
	before := ofi.CHeapInUse()
	p, err := ofipair.New(ofipair.Options{RegionSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	open := ofi.CHeapInUse()
	p.Close()
	after := ofi.CHeapInUse()
	if open <= before {
		t.Fatalf("C heap in use %d with a connected pair open, %d before it", open, before)
	}
	if after >= open {
		t.Fatalf("C heap in use %d after the pair closed, %d while it was open", after, open)
	}
}

// Segments up to the inject limit go with fi_inject: they arrive like the
// others, in order, but complete without a completion entry, so the first
// send completion the client sees is the one of the larger send after it.
func TestPostSendInject(t *testing.T) {
	const size = 4096
	recvs := []ofi.Segment{{Offset: 0, Len: size, Token: 100}, {Offset: size, Len: size, Token: 101}}
	p, err := ofipair.New(ofipair.Options{ServerRecv: recvs})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	mem := p.Client.Region.Bytes()
	for i := range mem[:2*size] {
		mem[i] = byte(i * 7)
	}
	sends := []ofi.Segment{{Offset: 0, Len: 64, Token: 1}, {Offset: size, Len: 200, Token: 2}}
	if k, err := p.Client.Endpoint.PostSendInject(p.Client.Region, sends, 64); k != 2 || err != nil {
		t.Fatalf("PostSendInject: %d, %v", k, err)
	}
	var got []ofi.Completion
	var sent *ofi.Completion
	buf := make([]ofi.Completion, 4)
	deadline := time.Now().Add(hangTimeout)
	for (len(got) < 2 || sent == nil) && time.Now().Before(deadline) {
		k, err := p.Client.CQ.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if k > 0 && sent == nil {
			c := buf[0]
			sent = &c
		}
		k, err = p.Server.CQ.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:k]...)
	}
	if len(got) != 2 || sent == nil {
		t.Fatalf("%d receives and send completion %v, want 2 and one", len(got), sent)
	}
	if sent.Token != 2 || sent.Flags&ofi.FlagSend == 0 {
		t.Errorf("first send completion %+v, want the larger send's (token 2): the injected one has none", *sent)
	}
	for i, c := range got {
		s := sends[i]
		if c.Token != uint64(100+i) || c.Len != s.Len {
			t.Fatalf("receive %d: %+v, want token %d and %d bytes", i, c, 100+i, s.Len)
		}
		want := mem[s.Offset : s.Offset+s.Len]
		if b := p.Server.Region.Bytes()[i*size : i*size+int(c.Len)]; !bytes.Equal(b, want) {
			t.Fatalf("message %d corrupted", i)
		}
	}
}

// A header from the region and a tail from Go memory arrive as one message
// in one receive buffer, and the send completes once with its token.
func TestPostSendTail(t *testing.T) {
	const size = 1 << 20
	recvs := []ofi.Segment{{Offset: 0, Len: size, Token: 100}}
	p, err := ofipair.New(ofipair.Options{ServerRecv: recvs})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Client.Info.NeedsRegistration() || p.Client.Info.SendIOVLimit() < 2 {
		t.Skipf("provider %s needs registered memory or takes one iovec", p.Client.Info.Provider())
	}
	mem := p.Client.Region.Bytes()
	copy(mem, "header: ")
	tail := make([]byte, size/2+3)
	for i := range tail {
		tail[i] = byte(i * 13)
	}
	var pin runtime.Pinner
	pin.Pin(&tail[0])
	defer pin.Unpin()
	if err := p.Client.Endpoint.PostSendTail(p.Client.Region, ofi.Segment{Offset: 0, Len: 8, Token: 7}, tail); err != nil {
		t.Fatal(err)
	}
	var sent, got []ofi.Completion
	buf := make([]ofi.Completion, 4)
	deadline := time.Now().Add(hangTimeout)
	for (len(got) < 1 || len(sent) < 1) && time.Now().Before(deadline) {
		k, err := p.Client.CQ.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, buf[:k]...)
		k, err = p.Server.CQ.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:k]...)
	}
	if len(sent) != 1 || sent[0].Token != 7 || sent[0].Flags&ofi.FlagSend == 0 {
		t.Fatalf("send completions %+v, want one with token 7", sent)
	}
	if len(got) != 1 || got[0].Token != 100 || got[0].Len != uint64(8+len(tail)) {
		t.Fatalf("receives %+v, want one of %d bytes with token 100", got, 8+len(tail))
	}
	want := append([]byte("header: "), tail...)
	if !bytes.Equal(p.Server.Region.Bytes()[:len(want)], want) {
		t.Fatal("header and tail did not arrive as sent")
	}
	if err := p.Client.Endpoint.PostSendTail(p.Client.Region, ofi.Segment{Offset: 0, Len: 8}, nil); err == nil {
		t.Error("PostSendTail with no tail: no error")
	}
}
