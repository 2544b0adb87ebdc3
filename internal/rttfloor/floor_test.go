//go:build linux

package rttfloor

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/netio-go/netio/reactor"
	"golang.org/x/sys/unix"
)

const msgSize = 64

// Environment of a child process that runs the echo end of a cross-process
// benchmark: the address to dial and the mode (see echoModes).
const (
	envAddr = "RTTFLOOR_ADDR"
	envMode = "RTTFLOOR_MODE"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(envAddr); addr != "" {
		if err := runChild(addr, os.Getenv(envMode)); err != nil {
			fmt.Fprintln(os.Stderr, "rttfloor child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// side is one end of a connection in the reactor shape: the socket belongs
// to the reactor thread, the user goroutine sees whole messages.
type side struct {
	r  *reactor.Reactor
	fd int // nonblocking; read and written on the reactor only

	in  [msgSize]byte // partial message being read (reactor)
	inN int

	// The one-slot inbox: the reactor fills msg and sets ready; the user
	// copies it out and clears ready. parked tells the reactor that the
	// user sleeps on the eventfd and needs a write to wake.
	msg    [msgSize]byte
	ready  atomic.Uint32
	parked atomic.Uint32
	evf    *os.File
	evRaw  syscall.RawConn
	ring   func(uintptr) bool
	wakes  atomic.Uint64 // eventfd writes (user wake-ups)
	polls  int           // the user polls this many times before it parks
	onReac bool          // answer on the reactor (netio's OnMessage)

	out  [msgSize]byte
	send sendTask
	err  atomic.Value
}

type sendTask struct{ s *side }

func (t *sendTask) Run() { t.s.write(t.s.out[:]) }

// write sends p whole; on a 64-byte ping-pong the socket buffer always has
// room, so a short write is an error here rather than a case to queue.
func (s *side) write(p []byte) {
	n, err := unix.Write(s.fd, p)
	if err == nil && n != len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		s.err.Store(err)
	}
}

func newSide(r *reactor.Reactor, fd int, sh shape, echo bool) (*side, error) {
	s := &side{r: r, fd: fd, polls: sh.polls, onReac: echo && sh.onReactor}
	s.send.s = s
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	s.evf = os.NewFile(uintptr(efd), "rttfloor-waker")
	if s.evRaw, err = s.evf.SyscallConn(); err != nil {
		return nil, err
	}
	one := [8]byte{1}
	s.ring = func(fd uintptr) bool { unix.Write(int(fd), one[:]); return true }
	if err := r.Register(fd, unix.EPOLLIN, s); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *side) close() {
	s.r.Unregister(s.fd)
	unix.Close(s.fd)
	s.evf.Close()
}

// HandleEvents runs on the reactor: it reads what the socket has and hands
// each whole message over (or answers it at once when onReac).
func (s *side) HandleEvents(uint32) {
	for {
		n, err := unix.Read(s.fd, s.in[s.inN:])
		if err == unix.EAGAIN {
			return
		}
		if err != nil || n == 0 {
			if err == nil {
				err = io.EOF
			}
			s.err.Store(err)
			s.r.Unregister(s.fd) // stop level-triggered EOF events
			s.ready.Store(1)
			s.wake()
			return
		}
		if s.inN += n; s.inN < msgSize {
			continue
		}
		s.inN = 0
		if s.onReac {
			s.write(s.in[:])
			continue
		}
		s.msg = s.in
		s.ready.Store(1)
		if s.parked.Load() != 0 {
			s.wake()
		}
	}
}

func (s *side) wake() {
	s.wakes.Add(1)
	s.evRaw.Write(s.ring)
}

// recv waits for the next message, polling s.polls times, then parked in
// the netpoller on the eventfd, the way netio's Conn.ReadMessage does.
func (s *side) recv(p []byte) error {
	var buf [8]byte
	for i := 0; ; i++ {
		if s.ready.Load() != 0 {
			if err, _ := s.err.Load().(error); err != nil {
				return err
			}
			copy(p, s.msg[:])
			s.ready.Store(0)
			return nil
		}
		if i < s.polls {
			runtime.Gosched()
			continue
		}
		s.parked.Store(1)
		if s.ready.Load() == 0 {
			if _, err := s.evf.Read(buf[:]); err != nil {
				return err
			}
		}
		s.parked.Store(0)
	}
}

// sendMsg hands p to the reactor (ring, and the doorbell if it sleeps).
func (s *side) sendMsg(p []byte) error {
	copy(s.out[:], p)
	return s.r.Submit(&s.send)
}

// tcpPair connects two loopback sockets.
func tcpPair(tb testing.TB) (client, server *net.TCPConn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	s := <-ch
	if s == nil {
		tb.Fatal("accept failed")
	}
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// takeFD takes the descriptor away from Go's netpoller: a duplicate of the
// socket (nonblocking, like the original), and the net.Conn closed.
func takeFD(c *net.TCPConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := raw.Control(func(s uintptr) { fd, derr = unix.Dup(int(s)) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, derr
	}
	c.Close()
	unix.CloseOnExec(fd)
	return fd, unix.SetNonblock(fd, true)
}

// usage is the process's context switches so far (every thread).
func usage() (vol, invol int64) {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return ru.Nvcsw, ru.Nivcsw
}

// counters gathers what one benchmark reports per round trip.
type counters struct {
	vol, invol       int64
	reactorWakes     uint64
	reactorDoorbells uint64
	userWakes        uint64
	reactors         []*reactor.Reactor
	sides            []*side
}

func (c *counters) snap() {
	c.vol, c.invol = usage()
	c.reactorWakes, c.reactorDoorbells, c.userWakes = 0, 0, 0
	for _, r := range c.reactors {
		st := r.Stats()
		c.reactorWakes += st.Wakeups
		c.reactorDoorbells += st.DoorbellWrites
	}
	for _, s := range c.sides {
		c.userWakes += s.wakes.Load()
	}
}

func (c *counters) report(b *testing.B) {
	before := *c
	c.snap()
	n := float64(b.N)
	b.ReportMetric(float64(c.vol-before.vol)/n, "vcsw/op")
	b.ReportMetric(float64(c.invol-before.invol)/n, "ivcsw/op")
	if len(c.reactors) > 0 {
		b.ReportMetric(float64(c.reactorWakes-before.reactorWakes)/n, "rwakes/op")
		b.ReportMetric(float64(c.reactorDoorbells-before.reactorDoorbells)/n, "doorbells/op")
	}
	if len(c.sides) > 0 {
		b.ReportMetric(float64(c.userWakes-before.userWakes)/n, "uwakes/op")
	}
}

// pingPong times b.N round trips of one 64-byte message.
func pingPong(b *testing.B, c *counters, send func([]byte) error, recv func([]byte) error) {
	msg := make([]byte, msgSize)
	buf := make([]byte, msgSize)
	for range 200 { // warm up
		if err := send(msg); err != nil {
			b.Fatal(err)
		}
		if err := recv(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	c.snap()
	b.ResetTimer()
	for range b.N {
		if err := send(msg); err != nil {
			b.Fatal(err)
		}
		if err := recv(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	c.report(b)
}

func tcpSend(c net.Conn) func([]byte) error {
	return func(p []byte) error { _, err := c.Write(p); return err }
}

func tcpRecv(c net.Conn) func([]byte) error {
	return func(p []byte) error { _, err := io.ReadFull(c, p); return err }
}

func tcpEcho(c net.Conn) error {
	buf := make([]byte, msgSize)
	for {
		if _, err := io.ReadFull(c, buf); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		if _, err := c.Write(buf); err != nil {
			return err
		}
	}
}

func sideEcho(s *side) error {
	buf := make([]byte, msgSize)
	for {
		if err := s.recv(buf); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
				return nil
			}
			return err
		}
		if err := s.sendMsg(buf); err != nil {
			return err
		}
	}
}

// shape is one configuration of the reactor shape.
type shape struct {
	name      string
	spin      time.Duration // reactor.Config.Spin (0: default 100 µs)
	polls     int           // user polls before parking
	onReactor bool          // the echo end answers on its reactor
}

// newReactor starts a reactor for sh.
func newReactor(sh shape) (*reactor.Reactor, error) {
	return reactor.New(&reactor.Config{Spin: sh.spin})
}

var shapes = []shape{
	{name: "reactor"},
	{name: "reactor-nospin", spin: -1},
	{name: "reactor-userpoll", polls: 50},
	{name: "reactor-onmessage", onReactor: true},
}

// BenchmarkInProcess is a 64-byte ping-pong in one process; ns/op is one
// round trip. tcp is net.TCPConn at both ends; reactor is netio's shape
// with one reactor serving both sockets (as netio has one per process);
// reactor2 gives each end its own reactor.
func BenchmarkInProcess(b *testing.B) {
	b.Run("tcp", func(b *testing.B) {
		c, s := tcpPair(b)
		defer c.Close()
		defer s.Close()
		go tcpEcho(s)
		pingPong(b, &counters{}, tcpSend(c), tcpRecv(c))
	})
	for _, sh := range shapes {
		for _, reactors := range []int{1, 2} {
			name := sh.name
			if reactors == 2 {
				name = "2" + name
			}
			b.Run(name, func(b *testing.B) { inProcess(b, sh, reactors) })
		}
	}
}

func inProcess(b *testing.B, sh shape, reactors int) {
	rc, err := newReactor(sh)
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	rs := rc
	if reactors == 2 {
		if rs, err = newReactor(sh); err != nil {
			b.Fatal(err)
		}
		defer rs.Close()
	}
	tc, ts := tcpPair(b)
	cfd, err := takeFD(tc)
	if err != nil {
		b.Fatal(err)
	}
	sfd, err := takeFD(ts)
	if err != nil {
		b.Fatal(err)
	}
	c, err := newSide(rc, cfd, sh, false)
	if err != nil {
		b.Fatal(err)
	}
	s, err := newSide(rs, sfd, sh, true)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	if !sh.onReactor {
		go func() { done <- sideEcho(s) }()
	}
	cnt := &counters{reactors: []*reactor.Reactor{rc}, sides: []*side{c, s}}
	if reactors == 2 {
		cnt.reactors = append(cnt.reactors, rs)
	}
	pingPong(b, cnt, c.sendMsg, c.recv)
	c.close()
	if !sh.onReactor {
		if err := <-done; err != nil {
			b.Error(err)
		}
	}
	s.close()
}

// BenchmarkCrossProcess is the same ping-pong with the echo end in a child
// process (this test binary again), so each side has its own cores' share:
// with the reactor shape, two threads per process on a 2-CPU machine. The
// counters are the parent's (the pinging side) only.
func BenchmarkCrossProcess(b *testing.B) {
	b.Run("tcp", func(b *testing.B) {
		conn, wait := child(b, "tcp")
		pingPong(b, &counters{}, tcpSend(conn), tcpRecv(conn))
		conn.Close()
		wait()
	})
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			conn, wait := child(b, sh.name)
			r, err := newReactor(sh)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			fd, err := takeFD(conn.(*net.TCPConn))
			if err != nil {
				b.Fatal(err)
			}
			c, err := newSide(r, fd, sh, false)
			if err != nil {
				b.Fatal(err)
			}
			pingPong(b, &counters{reactors: []*reactor.Reactor{r}, sides: []*side{c}}, c.sendMsg, c.recv)
			c.close()
			wait()
		})
	}
}

// child starts the echo end in a child process and returns the connection
// to it and a function that waits for the child to end.
func child(b *testing.B, mode string) (net.Conn, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envAddr+"="+ln.Addr().String(), envMode+"="+mode)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(20 * time.Second))
	conn, err := ln.Accept()
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		b.Fatal(err)
	}
	return conn, func() {
		if err := cmd.Wait(); err != nil {
			b.Error("child:", err)
		}
	}
}

// runChild is the echo end of a cross-process benchmark; it returns when
// the parent closes the connection.
func runChild(addr, mode string) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	if mode == "tcp" {
		defer conn.Close()
		return tcpEcho(conn)
	}
	var sh shape
	for _, s := range shapes {
		if s.name == mode {
			sh = s
		}
	}
	if sh.name == "" {
		return fmt.Errorf("unknown mode %q", mode)
	}
	r, err := newReactor(sh)
	if err != nil {
		return err
	}
	defer r.Close()
	fd, err := takeFD(conn.(*net.TCPConn))
	if err != nil {
		return err
	}
	s, err := newSide(r, fd, sh, true)
	if err != nil {
		return err
	}
	defer s.close()
	if sh.onReactor {
		for s.err.Load() == nil {
			time.Sleep(10 * time.Millisecond) // polling pace: the side reports its end in an atomic
		}
		return nil
	}
	return sideEcho(s)
}

// pinger is one connection to ping through, for BenchmarkInterleaved.
type pinger struct {
	name       string
	send, recv func([]byte) error
	sum        time.Duration
	n          int
}

// interleaveChunk is how many round trips one connection makes before the
// next takes over: short enough that every connection sees the same load
// from the rest of a shared machine, long enough that a reactor's spin
// (100 µs) is a small part of a turn.
const interleaveChunk = 64

// pingInterleaved runs b.N round trips spread over ps in turns and reports
// each one's mean round trip, and its ratio to the first one's.
func pingInterleaved(b *testing.B, ps []*pinger) {
	msg := make([]byte, msgSize)
	buf := make([]byte, msgSize)
	for _, p := range ps {
		for range 200 { // warm up
			if err := p.send(msg); err != nil {
				b.Fatal(p.name, err)
			}
			if err := p.recv(buf); err != nil {
				b.Fatal(p.name, err)
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i, turn := 0, 0; i < b.N; turn++ {
		p := ps[turn%len(ps)]
		start := time.Now()
		k := 0
		for ; k < interleaveChunk && i < b.N; k++ {
			if err := p.send(msg); err != nil {
				b.Fatal(p.name, err)
			}
			if err := p.recv(buf); err != nil {
				b.Fatal(p.name, err)
			}
			i++
		}
		p.sum += time.Since(start)
		p.n += k
	}
	b.StopTimer()
	base := float64(ps[0].sum) / float64(max(ps[0].n, 1))
	for _, p := range ps {
		if p.n == 0 {
			continue
		}
		mean := float64(p.sum) / float64(p.n)
		b.ReportMetric(mean/1e3, p.name+"-µs/rt")
		if p != ps[0] {
			b.ReportMetric(mean/base, p.name+"/"+ps[0].name)
		}
	}
}

// BenchmarkInterleaved measures net.TCPConn, the reactor shape and the
// shape with the echo on the reactor side by side, taking turns on one
// benchmark run, so that their ratios hold on a machine whose load swings
// (separate runs of BenchmarkInProcess or BenchmarkCrossProcess disagree by
// 2x there). In one process the two reactor-shape connections share one
// reactor, as netio's connections share its engine; across processes the
// pinging side has one reactor and every echo child its own.
func BenchmarkInterleaved(b *testing.B) {
	b.Run("in-process", func(b *testing.B) {
		r, err := reactor.New(nil)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		tc, ts := tcpPair(b)
		defer tc.Close()
		defer ts.Close()
		go tcpEcho(ts)
		ps := []*pinger{{name: "tcp", send: tcpSend(tc), recv: tcpRecv(tc)}}
		var sides []*side
		var echoes []chan error
		for _, sh := range []shape{{name: "reactor"}, {name: "onmessage", onReactor: true}} {
			a, z := tcpPair(b)
			afd, err := takeFD(a)
			if err != nil {
				b.Fatal(err)
			}
			zfd, err := takeFD(z)
			if err != nil {
				b.Fatal(err)
			}
			c, err := newSide(r, afd, sh, false)
			if err != nil {
				b.Fatal(err)
			}
			s, err := newSide(r, zfd, sh, true)
			if err != nil {
				b.Fatal(err)
			}
			sides = append(sides, c, s)
			if !sh.onReactor {
				done := make(chan error, 1)
				echoes = append(echoes, done)
				go func() { done <- sideEcho(s) }()
			}
			ps = append(ps, &pinger{name: sh.name, send: c.sendMsg, recv: c.recv})
		}
		pingInterleaved(b, ps)
		for i := 0; i < len(sides); i += 2 {
			sides[i].close()
		}
		for _, done := range echoes {
			if err := <-done; err != nil {
				b.Error(err)
			}
		}
		for i := 1; i < len(sides); i += 2 {
			sides[i].close()
		}
	})
	b.Run("cross-process", func(b *testing.B) {
		r, err := reactor.New(nil)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		conn, wait := child(b, "tcp")
		defer wait()
		defer conn.Close()
		ps := []*pinger{{name: "tcp", send: tcpSend(conn), recv: tcpRecv(conn)}}
		for _, mode := range []string{"reactor", "reactor-onmessage"} {
			conn, wait := child(b, mode)
			defer wait()
			fd, err := takeFD(conn.(*net.TCPConn))
			if err != nil {
				b.Fatal(err)
			}
			c, err := newSide(r, fd, shape{}, false)
			if err != nil {
				b.Fatal(err)
			}
			defer c.close()
			name := strings.TrimPrefix(mode, "reactor-")
			ps = append(ps, &pinger{name: name, send: c.sendMsg, recv: c.recv})
		}
		pingInterleaved(b, ps)
	})
}
