//go:build cgo && linux

package ofi

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hangGuard bounds the waits of these tests: a guard against a hang, not
// a measure of speed.
const hangGuard = 20 * time.Second

// cmHeader is libfabric tcp's 32-byte connection request header announcing
// n bytes of private data.
func cmHeader(n int) []byte {
	b := make([]byte, 32)
	b[0], b[1] = 3, 0 // version, ofi_ctrl_connreq
	binary.BigEndian.PutUint16(b[2:], uint16(n))
	binary.LittleEndian.PutUint64(b[24:], 1)
	return b
}

type testQueue struct {
	*ListenQueue
	infos    *InfoList
	fab      *Fabric
	addr     string
	ev       Event
	shut     bool
	requests int // requests read (and rejected)
}

// close drains and closes the queue, once.
func (q *testQueue) close(t *testing.T) {
	if q.shut {
		return
	}
	q.shut = true
	q.drain()
	if err := q.ListenQueue.Close(); err != nil {
		t.Errorf("closing the queue: %v", err)
	}
}

func openTestQueue(t *testing.T) *testQueue {
	t.Helper()
	infos, err := GetInfo(Hints{Provider: "tcp", Node: "127.0.0.1", Service: "0", Source: true})
	if err != nil {
		t.Fatal(err)
	}
	fab, err := OpenFabric(infos.Entries[0])
	if err != nil {
		infos.Free()
		t.Fatal(err)
	}
	q, err := fab.OpenListenQueue(infos.Entries[0], 64, 7)
	if err != nil {
		fab.Close()
		infos.Free()
		t.Fatal(err)
	}
	a, err := q.Addr()
	if err != nil {
		t.Fatal(err)
	}
	tq := &testQueue{ListenQueue: q, infos: infos, fab: fab, addr: a.String()}
	t.Cleanup(func() {
		tq.close(t)
		fab.Close()
		infos.Free()
	})
	return tq
}

// drain reads every event, rejecting and counting requests.
func (q *testQueue) drain() {
	for {
		ok, err := q.Read(&q.ev)
		if err != nil || !ok {
			return
		}
		if q.ev.Kind == EventConnReq {
			q.requests++
			q.Reject(q.ev.Info, []byte("no"))
		}
	}
}

// until reads the queue until cond holds.
func (q *testQueue) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, hangGuard)
		}
		q.drain()
		q.TryWait()
		q.Settle()
		time.Sleep(time.Millisecond) // polling pace: the queue is read without blocking
	}
}

func (q *testQueue) pending() (n int) {
	for _, p := range q.ListenQueue.reqs.pending {
		if !p.aborted {
			n++
		}
	}
	return n
}

func dialTCP(t *testing.T, addr string, send []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if len(send) > 0 {
		if _, err := c.Write(send); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// Clients that send a request's header and not its data, or nothing at
// all, do not hold the reader: their sockets are made non-blocking before
// the provider reads them, and a complete request behind them comes
// through.
func TestListenQueueIncompleteRequestsDoNotBlock(t *testing.T) {
	q := openTestQueue(t)
	const headers, silent = 20, 5
	for range headers {
		dialTCP(t, q.addr, cmHeader(24))
	}
	for range silent {
		dialTCP(t, q.addr, nil)
	}
	q.until(t, "every client accepted", func() bool { return q.pending() == headers+silent })
	for fd := range q.ListenQueue.reqs.pending {
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil || fl&unix.O_NONBLOCK == 0 {
			t.Fatalf("request socket %d: flags %#x %v, want O_NONBLOCK", fd, fl, err)
		}
	}
	complete := dialTCP(t, q.addr, append(cmHeader(24), make([]byte, 24)...))
	q.until(t, "the complete request", func() bool { return q.requests > 0 })
	complete.SetReadDeadline(time.Now().Add(hangGuard))
	hdr := make([]byte, 32)
	if _, err := io.ReadFull(complete, hdr); err != nil || hdr[1] != 6 {
		t.Fatalf("complete request answered %v %v, want a reject (type 6)", hdr, err)
	}
	if n := q.pending(); n != headers+silent {
		t.Errorf("%d requests pending after the complete one, want %d", n, headers+silent)
	}
}

// Beyond the limit the oldest request is aborted at once, and Sweep
// aborts what has waited too long: the clients see a reset, and the
// provider lets their sockets go.
func TestListenQueueBounds(t *testing.T) {
	q := openTestQueue(t)
	q.Bound(time.Hour, 3)
	var clients []net.Conn
	for i := range 4 {
		clients = append(clients, dialTCP(t, q.addr, cmHeader(24)))
		q.until(t, "the client accepted", func() bool {
			aborted, pending, _ := q.Status()
			return int(aborted)+pending == i+1
		})
	}
	if aborted, pending, next := q.Status(); aborted != 1 || pending != 3 || next.IsZero() {
		t.Fatalf("status with a limit of 3 after 4 clients: %d aborted, %d pending, next %v; want the oldest, 3 and a deadline", aborted, pending, next)
	}
	clients[0].SetReadDeadline(time.Now().Add(hangGuard))
	if _, err := clients[0].Read(make([]byte, 1)); !errors.Is(err, unix.ECONNRESET) {
		t.Errorf("oldest client: read %v, want a reset", err)
	}
	q.Bound(0, 3)
	q.Sweep()
	if aborted, pending, next := q.Status(); aborted != 4 || pending != 0 || !next.IsZero() {
		t.Fatalf("status after sweeping what is due: %d aborted, %d pending, next %v; want 4, none and none", aborted, pending, next)
	}
	for i, c := range clients[1:] {
		c.SetReadDeadline(time.Now().Add(hangGuard))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, unix.ECONNRESET) {
			t.Errorf("client %d: read %v, want a reset", i+1, err)
		}
	}
	q.until(t, "the provider let the aborted sockets go", func() bool { return len(q.ListenQueue.reqs.pending) == 0 })
}

// A client that sent a header and then closed its end must not leave the
// queue readable for ever (the provider can take its end of file for "try
// again").
func TestListenQueuePeerClosed(t *testing.T) {
	// One thread, as netio's reader: its errno carries from call to call.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	q := openTestQueue(t)
	c := dialTCP(t, q.addr, cmHeader(24))
	q.until(t, "the client accepted", func() bool { return q.pending() == 1 })
	q.drain() // the header is read, the data is not there
	c.Close()
	q.until(t, "the closed request gone", func() bool { return len(q.ListenQueue.reqs.pending) == 0 })
	if ok, err := q.TryWait(); !ok || err != nil {
		t.Fatalf("TryWait after the request went: %v %v, want the queue quiet", ok, err)
	}
}

// Close drops the requests still incomplete: their sockets are closed,
// not leaked (TestMain counts descriptors).
func TestListenQueueCloseDropsIncomplete(t *testing.T) {
	q := openTestQueue(t)
	var clients []net.Conn
	for range 4 {
		clients = append(clients, dialTCP(t, q.addr, cmHeader(24)))
	}
	q.until(t, "every client accepted", func() bool { return q.pending() == 4 })
	q.drain()
	if n := len(q.ListenQueue.reqs.orphans()); n != 4 {
		t.Fatalf("%d request sockets before close, want 4", n)
	}
	q.close(t)
	for i, c := range clients {
		c.SetReadDeadline(time.Now().Add(hangGuard))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Errorf("client %d: read succeeded after the listener closed", i)
		}
	}
}
