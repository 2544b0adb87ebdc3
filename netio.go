// Package netio moves messages between processes over high-performance
// fabrics (InfiniBand, RoCE, Omni-Path, EFA and plain TCP) through
// libfabric, with an API shaped like the net package.
//
// Listen and Dial work like net.Listen and net.Dial; the network names the
// libfabric provider ("tcp", "verbs", "efa", ...; "" picks
// DefaultNetwork, or $NETIO_PROVIDER when set) and the address is a
// host:port:
//
//	ln, err := netio.Listen("tcp", "127.0.0.1:0")
//	...
//	c, err := netio.Dial("tcp", ln.Addr().String())
//
// A *Conn is a net.Conn that keeps message boundaries: each Write sends one
// message at once (NetIO's low-latency mode, no batching), ReadMessage and
// AppendMessage return exactly one message, and Read treats the messages as
// a byte stream so that any net.Conn user (net/http, bufio, io.Copy) works
// unchanged. Flow control is credit-based: a connection never sends to a
// peer that has no receive buffer posted for it, which is what verbs
// requires, and Write blocks when the peer stops reading.
//
// In HighThroughput mode (WithMode) a connection is NetIO's buffered
// socket: Write copies the message behind an 8-byte length into the
// current page, and whole pages go out when full, on Flush, when the
// writer pauses and at the latest after FlushInterval. The reader decodes
// pages in its own goroutine; Next and NextBatch return messages without
// copying them, valid until the next read, and NextMessage returns one
// that stays valid until its Release. WriteBatch and NextBatch take the
// connection's lock once for many messages. TryWrite returns ErrWouldBlock
// instead of waiting for a free page; Stats counts messages, pages,
// flushes by cause and the time spent waiting for credit.
//
// Internally every connection of a process is driven by one reactor: a
// goroutine locked to its OS thread that alone touches libfabric, woken
// through an eventfd doorbell only when it is about to sleep (see package
// reactor). Other goroutines hand it work through lock-free rings: the fast
// path shares no lock with the reactor and makes no system call of its own
// per message (waking a reader that has parked costs one eventfd write).
// User code never runs on the reactor unless Config.OnMessage asks for it.
package netio

import (
	"errors"
	"net"
	"os"
	"runtime"
	"strconv"
	"time"
)

// Defaults used when a Config field is zero.
const (
	// DefaultNetwork is the provider used when the network is "" and
	// $NETIO_PROVIDER is unset: libfabric's tcp provider works everywhere.
	DefaultNetwork = "tcp"
	// DefaultBufferSize is the size of one receive buffer. Messages larger
	// than a buffer are sent in fragments of this size.
	DefaultBufferSize = 256 << 10
	// DefaultWindow is the number of receive buffers each side posts: the
	// credits the peer may use before it has to wait.
	DefaultWindow = 16
	// DefaultMaxMessageSize is the largest message a connection accepts.
	DefaultMaxMessageSize = 64 << 20
	// DefaultConnectTimeout bounds Dial when the context has no deadline:
	// libfabric would wait minutes for a host that drops SYNs.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultLinger is how long a closed connection keeps sending data
	// already written before it gives up.
	DefaultLinger = 5 * time.Second
	// DefaultPollFor is how long a waiting Read or Write polls before it
	// parks (Config.PollFor), on machines with 4 or more CPUs.
	DefaultPollFor = 50 * time.Microsecond
	// DefaultSpin is how long the reactor polls after activity before it
	// sleeps (yielding the CPU on every round); $NETIO_SPIN overrides it
	// (a Go duration; 0 never polls).
	DefaultSpin = 100 * time.Microsecond
	// DefaultPageSize is the page size of a HighThroughput connection
	// (Config.BufferSize), as in NetIO.
	DefaultPageSize = 1 << 20
	// DefaultPages is the number of receive pages a HighThroughput
	// connection posts (Config.Window).
	DefaultPages = 8
	// DefaultFlushInterval bounds how long a partly filled page waits
	// before it is sent, as in NetIO.
	DefaultFlushInterval = 2 * time.Second
	// DefaultBacklog is how many established connections a Listener queues
	// before Accept takes them; further requests are rejected.
	DefaultBacklog = 128
)

// Mode is how a connection sends. Both ends of a connection use the same
// mode: a Listener rejects a Dial in the other one.
type Mode uint8

const (
	// LowLatency sends every Write at once as its own libfabric message
	// (NetIO's low-latency socket): the shortest path for control traffic,
	// one fabric operation per message.
	LowLatency Mode = iota
	// HighThroughput copies messages into pages behind an 8-byte length
	// and sends whole pages (NetIO's high-throughput, buffered socket): a
	// page goes out when it is full, on Flush, when the writer pauses
	// (unless Config.NoIdleFlush) and at the latest after
	// Config.FlushInterval. Small messages then cost a copy, not a fabric
	// operation each.
	HighThroughput
)

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case LowLatency:
		return "low-latency"
	case HighThroughput:
		return "high-throughput"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// Config configures a Listener or a connection. The zero value is ready to
// use: every zero field means the default named in its comment.
type Config struct {
	// Mode is LowLatency (the zero value) or HighThroughput.
	Mode Mode
	// BufferSize is the size in bytes of each receive buffer this side
	// posts (header included); the peer fragments its messages, or sizes
	// its pages, to fit. Zero means DefaultBufferSize, or DefaultPageSize
	// in HighThroughput mode. At least 4 KiB.
	BufferSize int
	// Window is the number of receive buffers (pages) this side posts, so
	// the number of messages (pages) the peer may have in flight. Zero
	// means DefaultWindow, or DefaultPages in HighThroughput mode. At
	// least 4.
	//
	// A connection's registered memory is bounded by BufferSize × Window
	// for receiving plus as much for sending: 2 × 8 × 1 MiB = 16 MiB with
	// the HighThroughput defaults, 2 × 16 × 256 KiB = 8 MiB with the
	// LowLatency ones.
	Window int
	// FlushInterval is how long a partly filled page may wait before it
	// is sent (HighThroughput mode). Zero means DefaultFlushInterval.
	FlushInterval time.Duration
	// NoIdleFlush keeps a partly filled page until it is full, Flush is
	// called or FlushInterval passes, as NetIO does (HighThroughput
	// mode). By default the page also goes out as soon as the writer
	// pauses, which costs nothing while it writes without pause (pages
	// fill) and keeps a slow writer's messages from waiting up to
	// FlushInterval; see the README for the measurements.
	NoIdleFlush bool
	// MaxMessageSize is the largest message this side sends or accepts;
	// the smaller of the two sides' values applies to each direction.
	// Zero means DefaultMaxMessageSize.
	MaxMessageSize int
	// ConnectTimeout bounds connection set-up when Dial's context has no
	// earlier deadline. Zero means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Linger bounds how long Close keeps sending what was already written
	// when the peer is slow to take it. Zero means DefaultLinger.
	Linger time.Duration
	// PollFor is how long a Read or Write that has to wait keeps looking
	// for its data (yielding the processor in between) before it parks.
	// Waking a parked goroutine costs a thread wake-up, tens of µs on
	// small VMs; polling trades CPU for latency, which pays only where a
	// core is spare. Zero means DefaultPollFor on machines with 4 or more
	// CPUs and no polling on smaller ones; a negative value parks at once.
	// With GOMAXPROCS=1 it never polls.
	PollFor time.Duration
	// Backlog is the number of connections a Listener holds for Accept.
	// Zero means DefaultBacklog.
	Backlog int
	// OnMessage, when set, is NetIO's low-latency receive socket: every
	// message is handed to it on the reactor thread as soon as it
	// arrives, skipping the hop to a reading goroutine, and Read and
	// ReadMessage are not used. msg is valid only during the call. It must
	// return quickly and never block: it stalls every connection of the
	// process while it runs. It may call Write: when the peer has no room,
	// Write returns ErrWouldBlock there instead of waiting.
	OnMessage func(c *Conn, msg []byte)
}

// Option changes a Config; it returns an error for values out of range.
type Option func(*Config) error

// WithMode sets Config.Mode.
func WithMode(m Mode) Option {
	return func(c *Config) error {
		if m > HighThroughput {
			return errors.New("netio: unknown mode")
		}
		c.Mode = m
		return nil
	}
}

// WithFlushInterval sets Config.FlushInterval.
func WithFlushInterval(d time.Duration) Option {
	return func(c *Config) error {
		if d <= 0 {
			return errors.New("netio: flush interval must be positive")
		}
		c.FlushInterval = d
		return nil
	}
}

// WithNoIdleFlush sets Config.NoIdleFlush.
func WithNoIdleFlush() Option {
	return func(c *Config) error { c.NoIdleFlush = true; return nil }
}

// WithConfig replaces the whole configuration.
func WithConfig(c Config) Option { return func(dst *Config) error { *dst = c; return nil } }

// WithBufferSize sets Config.BufferSize.
func WithBufferSize(n int) Option {
	return func(c *Config) error {
		if n < minBufferSize || n > maxBufferSize {
			return errors.New("netio: buffer size out of range [4 KiB, 1 GiB]")
		}
		c.BufferSize = n
		return nil
	}
}

// WithWindow sets Config.Window.
func WithWindow(n int) Option {
	return func(c *Config) error {
		if n < minWindow || n > maxWindow {
			return errors.New("netio: window out of range [4, 4096]")
		}
		c.Window = n
		return nil
	}
}

// WithMaxMessageSize sets Config.MaxMessageSize.
func WithMaxMessageSize(n int) Option {
	return func(c *Config) error {
		if n <= 0 {
			return errors.New("netio: maximum message size must be positive")
		}
		c.MaxMessageSize = n
		return nil
	}
}

// WithConnectTimeout sets Config.ConnectTimeout.
func WithConnectTimeout(d time.Duration) Option {
	return func(c *Config) error {
		if d <= 0 {
			return errors.New("netio: connect timeout must be positive")
		}
		c.ConnectTimeout = d
		return nil
	}
}

// WithLinger sets Config.Linger.
func WithLinger(d time.Duration) Option {
	return func(c *Config) error {
		if d <= 0 {
			return errors.New("netio: linger must be positive")
		}
		c.Linger = d
		return nil
	}
}

// WithBacklog sets Config.Backlog.
func WithBacklog(n int) Option {
	return func(c *Config) error {
		if n <= 0 {
			return errors.New("netio: backlog must be positive")
		}
		c.Backlog = n
		return nil
	}
}

// WithOnMessage sets Config.OnMessage.
func WithOnMessage(f func(c *Conn, msg []byte)) Option {
	return func(c *Config) error { c.OnMessage = f; return nil }
}

const (
	minBufferSize = 4 << 10
	maxBufferSize = 1 << 30
	minWindow     = 4
	maxWindow     = 4096
)

func buildConfig(opts []Option) (Config, error) {
	var c Config
	for _, o := range opts {
		if err := o(&c); err != nil {
			return c, err
		}
	}
	ht := c.Mode == HighThroughput
	switch {
	case c.BufferSize == 0 && ht:
		c.BufferSize = DefaultPageSize
	case c.BufferSize == 0:
		c.BufferSize = DefaultBufferSize
	}
	switch {
	case c.Window == 0 && ht:
		c.Window = DefaultPages
	case c.Window == 0:
		c.Window = DefaultWindow
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = DefaultMaxMessageSize
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	if c.Backlog == 0 {
		c.Backlog = DefaultBacklog
	}
	switch {
	case c.BufferSize < minBufferSize || c.BufferSize > maxBufferSize:
		return c, errors.New("netio: buffer size out of range [4 KiB, 1 GiB]")
	case c.Window < minWindow || c.Window > maxWindow:
		return c, errors.New("netio: window out of range [4, 4096]")
	case c.MaxMessageSize < 0:
		return c, errors.New("netio: maximum message size must be positive")
	case c.Mode > HighThroughput:
		return c, errors.New("netio: unknown mode")
	case ht && c.OnMessage != nil:
		// Pages are decoded in the reading goroutine, never on the
		// reactor; OnMessage is the low-latency receive path.
		return c, errors.New("netio: OnMessage needs LowLatency mode")
	}
	return c, nil
}

func pollFor(c Config) time.Duration {
	switch {
	case runtime.GOMAXPROCS(0) < 2 || c.PollFor < 0:
		return 0
	case c.PollFor > 0:
		return c.PollFor
	case sparesCores():
		return DefaultPollFor
	}
	return 0
}

// WithPollFor sets Config.PollFor.
func WithPollFor(d time.Duration) Option {
	return func(c *Config) error { c.PollFor = d; return nil }
}

// args are Dial's or Listen's arguments, checked.
type args struct {
	op, provider, address, host, port string
	cfg                               Config
}

func (a *args) opError(err error) error {
	return &net.OpError{Op: a.op, Net: a.provider, Addr: stringAddr{a.provider, a.address}, Err: err}
}

// parseArgs applies the options and splits address; an empty host is
// defaultHost, as in the net package.
func parseArgs(op, network, address, defaultHost string, opts []Option) (*args, error) {
	a := &args{op: op, provider: provider(network), address: address}
	var err error
	if a.cfg, err = buildConfig(opts); err != nil {
		return nil, a.opError(err)
	}
	if a.host, a.port, err = net.SplitHostPort(address); err != nil {
		return nil, a.opError(err)
	}
	if err = checkPort(a.port); err != nil {
		return nil, a.opError(err)
	}
	if a.host == "" {
		a.host = defaultHost
	}
	return a, nil
}

// provider maps a network argument to a libfabric provider name.
func provider(network string) string {
	if network != "" {
		return network
	}
	if p := os.Getenv("NETIO_PROVIDER"); p != "" {
		return p
	}
	return DefaultNetwork
}

// Errors reported by connections, wrapped in *net.OpError.
var (
	// ErrMessageTooLarge is returned by Write for a message above the
	// connection's maximum, and closes a connection whose peer sends one.
	ErrMessageTooLarge = errors.New("netio: message too large")
	// ErrProtocol closes a connection whose peer broke the wire protocol
	// (a truncated or lying header, an unknown control message, credits it
	// was never owed).
	ErrProtocol = errors.New("netio: protocol violation")
	// ErrRejected is returned by Dial when the listener refused the
	// connection (its backlog was full, or it is closing).
	ErrRejected = errors.New("netio: connection rejected")
	// ErrWouldBlock is returned by TryWrite when the message does not fit
	// in the free send buffers (NetIO's AGAIN), and by a Write made from
	// Config.OnMessage (on the reactor) when the peer has no room: waiting
	// there would stop the reactor that makes the room.
	ErrWouldBlock = errors.New("netio: write would block")
)
