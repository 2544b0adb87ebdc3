package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/ofi"
	zmq "github.com/pebbe/zmq4"
)

// A mode is one system measured in one way. Its server starts first and
// announces the address the client connects to; one of the two (timedBy)
// measures and returns the Result, the other returns only on an error (the
// parent kills it once the result is in).
type mode struct {
	name    string // the -mode flag value
	label   string // in tables and the legend
	latency bool   // a 64 B round trip instead of a one-way stream
	timedBy string // "server" or "client"
	server  func(a *childArgs, announce func(addr string)) (*Result, error)
	client  func(a *childArgs) (*Result, error)
	// cArgs, when set, makes the C peer (csrc/zmq_thr.c, built by the
	// parent) play both sides instead of this binary; it returns that
	// program's arguments for one side. server and client are then nil.
	cArgs func(a *childArgs) []string
	// subs, for the publish/subscribe rows (pubsubModes), is how many
	// subscriber processes (clients) the publisher (server) has; system
	// names the row without the fan-out.
	subs   int
	system string
	// fanout marks the fan-out rows (fanout.go): publish/subscribe at
	// 64 B only, in a table of their own.
	fanout bool
	// provider, when set, is a libfabric provider the row needs beyond
	// tcp; a run skips the row, saying so, where libfabric lacks it.
	provider string
}

// A fabric is what a netio row listens and dials on.
type fabric struct {
	network string // netio.Listen's and Dial's network
	address string // the address to listen on
}

var (
	// onTCP: connected endpoints (FI_EP_MSG) over loopback.
	onTCP = fabric{"tcp", "127.0.0.1:0"}
	// onSHM: reliable-datagram endpoints in shared memory. shm names its
	// endpoints after the process, so Listen takes no address and the
	// listener's Addr (fi_shm://...) is what the client dials.
	onSHM = fabric{"shm", ""}
)

func (f fabric) listen(opts ...netio.Option) (*netio.Listener, error) {
	ln, err := netio.Listen(f.network, f.address, opts...)
	if errors.Is(err, ofi.ENODATA) {
		return nil, fmt.Errorf("libfabric here has no %s provider: %w", f.network, err)
	}
	return ln, err
}

func (f fabric) dial(addr string, opts ...netio.Option) (*netio.Conn, error) {
	return netio.Dial(f.network, addr, opts...)
}

// streamModes are the one-way throughput rows, in table order; netio first.
var streamModes = []*mode{
	{name: "netio", label: "netio LL (Write / ReadMessage)", timedBy: "server", server: netioReceiver(onTCP), client: netioSender(onTCP)},
	{name: "netio-ht", label: "netio HT (Write / NextMessage+Release)", timedBy: "server", server: netioHTReceiver(onTCP), client: netioHTSender(onTCP)},
	{name: "netio-ht-batch", label: "netio HT (WriteBatch / NextBatch)", timedBy: "server", server: netioHTBatchReceiver, client: netioHTBatchSender},
	{name: "zmq-push", label: "ZeroMQ PUSH/PULL (Go)", timedBy: "server", server: zmqPullReceiver, client: zmqPushSender},
	{name: "zmq-c", label: "ZeroMQ PUSH/PULL (C)", timedBy: "server", cArgs: zmqCArgs},
	{name: "zmq-xpub", label: "ZeroMQ XPUB/SUB, XPUB_NODROP (Go)", timedBy: "client", server: zmqXpubSender, client: zmqSubReceiver},
	{name: "tcp", label: "Go net.TCPConn, one Write per message", timedBy: "server", server: tcpReceiver(false), client: tcpSender(false)},
	{name: "tcp-bufio", label: "Go net.TCPConn + 1 MiB bufio", timedBy: "server", server: tcpReceiver(true), client: tcpSender(true)},
	{name: "ofi", label: "bare libfabric (ofi/), windowed, busy poll", timedBy: "server", server: ofiReceiver, client: ofiSender},
	// The same netio rows between two processes over libfabric's shm
	// provider instead of tcp.
	{name: "netio-shm", label: "netio on shm, LL (Write / ReadMessage)", timedBy: "server", server: netioReceiver(onSHM), client: netioSender(onSHM), provider: "shm"},
	{name: "netio-ht-shm", label: "netio on shm, HT (Write / NextMessage+Release)", timedBy: "server", server: netioHTReceiver(onSHM), client: netioHTSender(onSHM), provider: "shm"},
	{name: "ofi-shm", label: "bare libfabric on shm (ofi/ RDM), windowed, busy poll", timedBy: "server", server: ofiRDMReceiver("shm"), client: ofiRDMSender("shm"), provider: "shm"},
}

// optInModes run only when -modes names them: not part of the default
// run's table.
var optInModes = []*mode{
	// What bare libfabric reaches when its sender copies each message
	// into registered memory, as netio's Write does: the "ofi" row sends
	// without touching the payload, a rate no API that takes the caller's
	// bytes and returns before they are sent can reach.
	{name: "ofi-copy", label: "bare libfabric, sender copies each message in", timedBy: "server", server: ofiReceiver, client: ofiCopySender},
}

// latencyModes are the 64 B round-trip rows; netio first.
var latencyModes = []*mode{
	{name: "rtt-netio", label: "netio (Write / ReadMessage both sides)", latency: true, timedBy: "client", server: netioEcho(onTCP, false), client: netioPinger(onTCP)},
	{name: "rtt-netio-onmessage", label: "netio, server answers in OnMessage", latency: true, timedBy: "client", server: netioEcho(onTCP, true), client: netioPinger(onTCP)},
	{name: "rtt-zmq", label: "ZeroMQ REQ/REP (Go)", latency: true, timedBy: "client", server: zmqRep, client: zmqReq},
	{name: "rtt-tcp", label: "Go net.TCPConn, blocking", latency: true, timedBy: "client", server: tcpEcho, client: tcpPinger},
	{name: "rtt-ofi", label: "bare libfabric (ofi/), busy poll", latency: true, timedBy: "client", server: ofiEcho, client: ofiPinger},
	{name: "rtt-netio-shm", label: "netio on shm (Write / ReadMessage both sides)", latency: true, timedBy: "client", server: netioEcho(onSHM, false), client: netioPinger(onSHM), provider: "shm"},
	{name: "rtt-ofi-shm", label: "bare libfabric on shm (ofi/ RDM), busy poll", latency: true, timedBy: "client", server: ofiRDMEcho("shm"), client: ofiRDMPinger("shm"), provider: "shm"},
}

// testModes are extra modes the tests register (in the child too, since
// the test binary is the child there).
var testModes []*mode

func findMode(name string) *mode {
	for _, m := range append(append(append(append(append([]*mode(nil), streamModes...), optInModes...), latencyModes...), pubsubModes...), append(fanoutModes, testModes...)...) {
		if m.name == name {
			return m
		}
	}
	return nil
}

// ---- netio: NetIO's low-latency mode, one Write per message.

func netioReceiver(f fabric) func(*childArgs, func(string)) (*Result, error) {
	return func(a *childArgs, announce func(string)) (*Result, error) {
		ln, err := f.listen()
		if err != nil {
			return nil, err
		}
		announce(ln.Addr().String())
		c, err := ln.AcceptConn()
		if err != nil {
			return nil, err
		}
		cnt := newCounter(a)
		buf := make([]byte, a.Size)
		for {
			n, err := c.ReadMessage(buf)
			if err != nil {
				return nil, err
			}
			if done, err := cnt.got(buf[:n]); err != nil || done {
				if err != nil {
					return nil, err
				}
				return cnt.result()
			}
		}
	}
}

func netioSender(f fabric) func(*childArgs) (*Result, error) {
	return func(a *childArgs) (*Result, error) {
		c, err := f.dial(a.Addr)
		if err != nil {
			return nil, err
		}
		msg := payload(a.Size)
		for seq := uint64(0); ; seq++ {
			binary.LittleEndian.PutUint64(msg, seq)
			if _, err := c.Write(msg); err != nil {
				return nil, err
			}
		}
	}
}

// ---- netio HighThroughput: messages copied into 1 MiB pages behind an
// 8-byte length, received without a copy. The sender is killed like the
// others once the receiver has its result, so it neither flushes nor closes.

func netioHTReceiver(f fabric) func(*childArgs, func(string)) (*Result, error) {
	return func(a *childArgs, announce func(string)) (*Result, error) {
		ln, err := f.listen(netio.WithMode(netio.HighThroughput))
		if err != nil {
			return nil, err
		}
		announce(ln.Addr().String())
		c, err := ln.AcceptConn()
		if err != nil {
			return nil, err
		}
		cnt := newCounter(a)
		cnt.m.sample = func() int64 { return int64(c.Stats().PagesReceived) }
		for {
			m, err := c.NextMessage()
			if err != nil {
				return nil, err
			}
			done, err := cnt.got(m.Bytes())
			m.Release()
			if err != nil {
				return nil, err
			}
			if done {
				return cnt.result()
			}
		}
	}
}

// htBatch is how many messages netioHTBatchReceiver asks NextBatch for.
const htBatch = 256

// netioHTBatchReceiver reads with NextBatch: the messages already at hand
// (up to htBatch) under one lock, valid until the next read, nothing to
// release. Its sender writes htBatch messages per WriteBatch.
func netioHTBatchReceiver(a *childArgs, announce func(string)) (*Result, error) {
	ln, err := onTCP.listen(netio.WithMode(netio.HighThroughput))
	if err != nil {
		return nil, err
	}
	announce(ln.Addr().String())
	c, err := ln.AcceptConn()
	if err != nil {
		return nil, err
	}
	cnt := newCounter(a)
	cnt.m.sample = func() int64 { return int64(c.Stats().PagesReceived) }
	batch := make([][]byte, htBatch)
	for {
		k, err := c.NextBatch(batch)
		if err != nil {
			return nil, err
		}
		for _, m := range batch[:k] {
			done, err := cnt.got(m)
			if err != nil {
				return nil, err
			}
			if done {
				return cnt.result()
			}
		}
	}
}

func netioHTSender(f fabric) func(*childArgs) (*Result, error) {
	return func(a *childArgs) (*Result, error) {
		c, err := f.dial(a.Addr, netio.WithMode(netio.HighThroughput))
		if err != nil {
			return nil, err
		}
		msg := payload(a.Size)
		for seq := uint64(0); ; seq++ {
			binary.LittleEndian.PutUint64(msg, seq)
			if _, err := c.Write(msg); err != nil {
				return nil, err
			}
		}
	}
}

// netioHTBatchSender writes htBatch messages per WriteBatch call, each
// with its own sequence number.
func netioHTBatchSender(a *childArgs) (*Result, error) {
	c, err := onTCP.dial(a.Addr, netio.WithMode(netio.HighThroughput))
	if err != nil {
		return nil, err
	}
	batch := make([][]byte, htBatch)
	for i := range batch {
		batch[i] = payload(a.Size)
	}
	for seq := uint64(0); ; {
		for _, msg := range batch {
			binary.LittleEndian.PutUint64(msg, seq)
			seq++
		}
		if _, err := c.WriteBatch(batch); err != nil {
			return nil, err
		}
	}
}

func netioEcho(f fabric, onMessage bool) func(*childArgs, func(string)) (*Result, error) {
	return func(a *childArgs, announce func(string)) (*Result, error) {
		var opts []netio.Option
		if onMessage {
			opts = append(opts, netio.WithOnMessage(func(c *netio.Conn, msg []byte) { c.Write(msg) }))
		}
		ln, err := f.listen(opts...)
		if err != nil {
			return nil, err
		}
		announce(ln.Addr().String())
		c, err := ln.AcceptConn()
		if err != nil {
			return nil, err
		}
		if onMessage {
			select {} // the reactor answers
		}
		buf := make([]byte, 64<<10)
		for {
			n, err := c.ReadMessage(buf)
			if err != nil {
				return nil, err
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return nil, err
			}
		}
	}
}

func netioPinger(f fabric) func(*childArgs) (*Result, error) {
	return func(a *childArgs) (*Result, error) {
		c, err := f.dial(a.Addr)
		if err != nil {
			return nil, err
		}
		msg, buf := payload(a.Size), make([]byte, a.Size)
		return pinger(a, func(seq uint64) error {
			binary.LittleEndian.PutUint64(msg, seq)
			if _, err := c.Write(msg); err != nil {
				return err
			}
			n, err := c.ReadMessage(buf)
			if err != nil {
				return err
			}
			return checkEcho(buf[:n], a.Size, seq)
		})
	}
}

// ---- Go's net.TCPConn: an 8-byte length prefix, then the payload.

func tcpListen(announce func(string)) (net.Conn, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	announce(ln.Addr().String())
	c, err := ln.Accept()
	ln.Close()
	return c, err
}

// readFramed reads one length-prefixed message into buf.
func readFramed(r io.Reader, hdr, buf []byte) ([]byte, error) {
	if _, err := io.ReadFull(r, hdr[:8]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(hdr)
	if n > uint64(len(buf)) {
		return nil, fmt.Errorf("length prefix %d above %d", n, len(buf))
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// tcpReceiver reads with io.ReadFull straight from the connection, or
// through a 1 MiB bufio.Reader when buffered.
func tcpReceiver(buffered bool) func(*childArgs, func(string)) (*Result, error) {
	return func(a *childArgs, announce func(string)) (*Result, error) {
		c, err := tcpListen(announce)
		if err != nil {
			return nil, err
		}
		var r io.Reader = c
		if buffered {
			r = bufio.NewReaderSize(c, 1<<20)
		}
		cnt := newCounter(a)
		hdr, buf := make([]byte, 8), make([]byte, a.Size)
		for {
			msg, err := readFramed(r, hdr, buf)
			if err != nil {
				return nil, err
			}
			if done, err := cnt.got(msg); err != nil || done {
				if err != nil {
					return nil, err
				}
				return cnt.result()
			}
		}
	}
}

// tcpSender makes one Write of prefix and payload per message, or writes
// both into a 1 MiB bufio.Writer that goes out when full. (The run ends by
// being killed once the receiver has its result, so no final Flush counts.)
func tcpSender(buffered bool) func(*childArgs) (*Result, error) {
	return func(a *childArgs) (*Result, error) {
		c, err := net.Dial("tcp", a.Addr)
		if err != nil {
			return nil, err
		}
		frame := payload(8 + a.Size)
		binary.LittleEndian.PutUint64(frame, uint64(a.Size))
		if buffered {
			w := bufio.NewWriterSize(c, 1<<20)
			hdr, msg := frame[:8], frame[8:]
			for seq := uint64(0); ; seq++ {
				binary.LittleEndian.PutUint64(msg, seq)
				w.Write(hdr)
				if _, err := w.Write(msg); err != nil {
					return nil, err
				}
			}
		}
		for seq := uint64(0); ; seq++ {
			binary.LittleEndian.PutUint64(frame[8:], seq)
			if _, err := c.Write(frame); err != nil {
				return nil, err
			}
		}
	}
}

func tcpEcho(a *childArgs, announce func(string)) (*Result, error) {
	c, err := tcpListen(announce)
	if err != nil {
		return nil, err
	}
	frame := make([]byte, 8+64<<10)
	for {
		msg, err := readFramed(c, frame[:8], frame[8:])
		if err != nil {
			return nil, err
		}
		if _, err := c.Write(frame[:8+len(msg)]); err != nil {
			return nil, err
		}
	}
}

func tcpPinger(a *childArgs) (*Result, error) {
	c, err := net.Dial("tcp", a.Addr)
	if err != nil {
		return nil, err
	}
	frame := payload(8 + a.Size)
	binary.LittleEndian.PutUint64(frame, uint64(a.Size))
	hdr, buf := make([]byte, 8), make([]byte, a.Size)
	return pinger(a, func(seq uint64) error {
		binary.LittleEndian.PutUint64(frame[8:], seq)
		if _, err := c.Write(frame); err != nil {
			return err
		}
		msg, err := readFramed(c, hdr, buf)
		if err != nil {
			return err
		}
		return checkEcho(msg, a.Size, seq)
	})
}

// ---- ZeroMQ through pebbe/zmq4, default context (one I/O thread).

// zmqHWM is the high-water mark, in messages, on both sides: ZeroMQ's
// default of 1000, but at most ~32 MiB of queued messages per socket
// (1000 x 1 MiB would queue a gigabyte). Every mode here blocks at the
// mark rather than dropping.
func zmqHWM(size int) int {
	return max(16, min(1000, (32<<20)/size))
}

func zmqSocket(t zmq.Type, size int) (*zmq.Socket, error) {
	s, err := zmq.NewSocket(t)
	if err != nil {
		return nil, err
	}
	if err := s.SetSndhwm(zmqHWM(size)); err != nil {
		return nil, err
	}
	if err := s.SetRcvhwm(zmqHWM(size)); err != nil {
		return nil, err
	}
	return s, nil
}

func zmqBind(s *zmq.Socket, announce func(string)) error {
	if err := s.Bind("tcp://127.0.0.1:*"); err != nil {
		return err
	}
	ep, err := s.GetLastEndpoint()
	if err != nil {
		return err
	}
	announce(ep)
	return nil
}

// zmqReceive counts what a PULL or SUB socket receives.
func zmqReceive(a *childArgs, s *zmq.Socket) (*Result, error) {
	cnt := newCounter(a)
	for {
		msg, err := s.RecvBytes(0)
		if err != nil {
			return nil, err
		}
		if done, err := cnt.got(msg); err != nil || done {
			if err != nil {
				return nil, err
			}
			return cnt.result()
		}
	}
}

func zmqSend(a *childArgs, s *zmq.Socket) (*Result, error) {
	msg := payload(a.Size)
	for seq := uint64(0); ; seq++ {
		binary.LittleEndian.PutUint64(msg, seq)
		if _, err := s.SendBytes(msg, 0); err != nil {
			return nil, err
		}
	}
}

func zmqPullReceiver(a *childArgs, announce func(string)) (*Result, error) {
	s, err := zmqSocket(zmq.PULL, a.Size)
	if err != nil {
		return nil, err
	}
	if err := zmqBind(s, announce); err != nil {
		return nil, err
	}
	return zmqReceive(a, s)
}

func zmqPushSender(a *childArgs) (*Result, error) {
	s, err := zmqSocket(zmq.PUSH, a.Size)
	if err != nil {
		return nil, err
	}
	if err := s.Connect(a.Addr); err != nil {
		return nil, err
	}
	return zmqSend(a, s)
}

// zmqXpubSender publishes without loss: XPUB_NODROP makes a send at the
// high-water mark wait (it would return EAGAIN with ZMQ_DONTWAIT) instead
// of dropping, as plain PUB does. It starts once the subscription has
// arrived, so that message 0 is the first the subscriber can get.
func zmqXpubSender(a *childArgs, announce func(string)) (*Result, error) {
	s, err := zmqSocket(zmq.XPUB, a.Size)
	if err != nil {
		return nil, err
	}
	if err := s.SetXpubNodrop(true); err != nil {
		return nil, err
	}
	if err := zmqBind(s, announce); err != nil {
		return nil, err
	}
	sub, err := s.RecvBytes(0)
	if err != nil {
		return nil, err
	}
	if len(sub) == 0 || sub[0] != 1 {
		return nil, fmt.Errorf("expected a subscription, got %q", sub)
	}
	return zmqSend(a, s)
}

func zmqSubReceiver(a *childArgs) (*Result, error) {
	s, err := zmqSocket(zmq.SUB, a.Size)
	if err != nil {
		return nil, err
	}
	if err := s.SetSubscribe(""); err != nil {
		return nil, err
	}
	if err := s.Connect(a.Addr); err != nil {
		return nil, err
	}
	return zmqReceive(a, s)
}

// zmqCArgs are the C peer's arguments (see csrc/zmq_thr.c): PULL
// receiver or PUSH sender with the same high-water marks as the Go rows.
func zmqCArgs(a *childArgs) []string {
	hwm := strconv.Itoa(zmqHWM(a.Size))
	if a.Role == "server" {
		return []string{"server", strconv.Itoa(a.Size), hwm,
			strconv.FormatInt(a.Warmup.Microseconds(), 10), strconv.FormatInt(a.Measure.Microseconds(), 10)}
	}
	return []string{"client", strconv.Itoa(a.Size), hwm, a.Addr}
}

func zmqRep(a *childArgs, announce func(string)) (*Result, error) {
	s, err := zmqSocket(zmq.REP, a.Size)
	if err != nil {
		return nil, err
	}
	if err := zmqBind(s, announce); err != nil {
		return nil, err
	}
	for {
		msg, err := s.RecvBytes(0)
		if err != nil {
			return nil, err
		}
		if _, err := s.SendBytes(msg, 0); err != nil {
			return nil, err
		}
	}
}

func zmqReq(a *childArgs) (*Result, error) {
	s, err := zmqSocket(zmq.REQ, a.Size)
	if err != nil {
		return nil, err
	}
	if err := s.Connect(a.Addr); err != nil {
		return nil, err
	}
	msg := payload(a.Size)
	return pinger(a, func(seq uint64) error {
		binary.LittleEndian.PutUint64(msg, seq)
		if _, err := s.SendBytes(msg, 0); err != nil {
			return err
		}
		reply, err := s.RecvBytes(0)
		if err != nil {
			return err
		}
		return checkEcho(reply, a.Size, seq)
	})
}
