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
// A *Conn is a net.Conn that keeps message boundaries: each Write is one
// message. In the default LowLatency mode a message written while the
// connection is idle is sent at once; messages written while earlier sends
// are still going out are packed into the next send, so a stream of small
// messages costs a fabric operation per batch, and no timer ever holds a
// message back. ReadMessage and AppendMessage return exactly one message,
// and Read treats the messages as a byte stream so that any net.Conn user
// (net/http, bufio, io.Copy) works unchanged. Flow control is credit-based: a connection never sends to a
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
// Publish/subscribe: ListenPublisher listens for subscribers, and Publish
// sends a message under a 64-bit tag to every subscriber of the tag.
// Subscribe dials a publisher, names its tags in-band and returns once the
// publisher has acknowledged them; its channel C delivers each tag's
// messages in order, each with the tag's sequence number, so loss is never
// silent. Per subscription, WithMode picks LowLatency (sent at once,
// packed behind sends in flight) or HighThroughput (pages), and WithPolicy
// what happens when
// the subscriber falls behind: Block (lossless, Publish waits, up to the
// publisher's slow-subscriber limit), DropOldest or DropNewest (counted in
// Stats). A lost connection is made again with backoff, and the
// subscription carries on; its Events channel says what happened.
// Publisher.Shutdown ends a publisher without silent loss.
//
// Every Listen, Dial, ListenPublisher and Subscribe requires a pre-shared
// key, by default the user's key file ($NETIO_KEY_FILE, or DefaultKeyFile,
// made with a random key on first use): processes of one user on one host
// connect with no configuration, other hosts need a copy of the file, and
// a peer without the key is turned away before libfabric reads anything it
// sends. Config.Insecure turns this off, at the risk it documents. The key
// authenticates connection set-up only: data is not encrypted.
//
// Internally every connection of a process is driven by one reactor: a
// goroutine locked to its OS thread that alone touches libfabric, woken
// through an eventfd doorbell only when it is about to sleep (see package
// reactor); connection requests are read on a second thread, so that
// nothing a peer does before it is admitted holds the first. Other
// goroutines hand it work through lock-free rings: the fast
// path shares no lock with the reactor and makes no system call of its own
// per message (waking a reader that has parked costs one eventfd write).
// User code never runs on the reactor unless Config.OnMessage asks for it.
package netio

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/netio-go/netio/internal/budget"
	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/ofi"
	"github.com/netio-go/netio/reactor"
)

// Defaults used when a Config field is zero.
const (
	// DefaultNetwork is the provider used when the network is "" and
	// $NETIO_PROVIDER is unset: libfabric's tcp provider works everywhere.
	DefaultNetwork = "tcp"
	// DefaultBufferSize is Config.BufferSize in LowLatency mode: the size
	// of one receive buffer. Messages larger than a buffer go on in the
	// next ones. HighThroughput mode uses DefaultPageSize.
	DefaultBufferSize = 256 << 10
	// DefaultWindow is Config.Window in LowLatency mode: the number of
	// receive buffers each side posts, the credits the peer may use before
	// it has to wait. HighThroughput mode uses DefaultPages.
	DefaultWindow = 16
	// DefaultMaxMessageSize is the largest message a connection accepts.
	DefaultMaxMessageSize = 64 << 20
	// DefaultConnectTimeout bounds Dial when the context has no deadline
	// (libfabric would wait minutes for a host that drops SYNs), and the
	// set-up of each connection a Listener or Publisher accepts.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultLinger is how long a closed connection keeps sending data
	// already written before it gives up.
	DefaultLinger = 5 * time.Second
	// DefaultPollFor is how long a waiting Read or Write polls before it
	// parks (Config.PollFor), on machines with 4 or more CPUs.
	DefaultPollFor = 50 * time.Microsecond
	// DefaultSpin is how long the reactor polls after activity before it
	// sleeps (yielding the CPU on every round); $NETIO_SPIN overrides it
	// (a Go duration; 0 never polls). It is the reactor package's default.
	DefaultSpin = reactor.DefaultSpin
	// DefaultPageSize is Config.BufferSize in HighThroughput mode: what a
	// page carries, as in NetIO (a message of this size travels whole in
	// one page; the page adds its header and the message's length). It
	// is not another name for DefaultBufferSize, which is the LowLatency
	// default of the same field: the zero BufferSize means one or the
	// other by Config.Mode.
	DefaultPageSize = 1 << 20
	// DefaultPages is Config.Window in HighThroughput mode: the number of
	// receive pages each side posts. DefaultWindow is the LowLatency
	// default of the same field.
	DefaultPages = 8
	// DefaultFlushInterval bounds how long a partly filled page waits
	// before it is sent, as in NetIO.
	DefaultFlushInterval = 2 * time.Second
	// DefaultBacklog is how many established connections a Listener queues
	// before Accept takes them; further requests are rejected.
	DefaultBacklog = 128
	// DefaultMaxConns is how many connections a Listener or Publisher
	// holds at once (Config.MaxConns). Each costs about 7 file
	// descriptors on tcp and, with the LowLatency defaults, 8 MiB of
	// registered memory: 1,024 of them take ~7,000 descriptors and 8 GiB
	// of address space, within what a server is usually given, while a
	// flood of requests is refused long before it exhausts the process.
	DefaultMaxConns = 1024
	// DefaultMaxTags is how many tags one subscriber's connection may hold
	// at a Publisher (Config.MaxTags). A subscribed tag costs about 300
	// bytes (measured, publisher and subscriber in one process, 100,000
	// tags): 16,384 of them 5 MiB, and a publisher at DefaultMaxConns at
	// most 5 GiB.
	DefaultMaxTags = 16384
	// DefaultSubscriptionBuffer is how many messages a Subscription's
	// channel holds.
	DefaultSubscriptionBuffer = 1024
	// DefaultHeartbeatInterval is Config.HeartbeatInterval: how long a
	// connection may send nothing before it sends a heartbeat.
	DefaultHeartbeatInterval = time.Second
	// DefaultHeartbeatTimeout is Config.HeartbeatTimeout: how long a
	// connection waits without hearing from its peer before it ends with
	// ErrPeerTimeout. A cut link or a stopped peer is otherwise noticed
	// only when the kernel gives up retransmitting, about 15 minutes.
	DefaultHeartbeatTimeout = 5 * time.Second
)

// Mode is how a connection sends. Both ends of a connection use the same
// mode: a Listener rejects a Dial in the other one.
type Mode uint8

const (
	// LowLatency sends a Write at once (NetIO's low-latency socket): the
	// shortest path for control traffic. Messages written while earlier
	// sends are still going out are packed into the next one, as ZeroMQ
	// does, so that a stream of small messages costs a fabric operation
	// per batch, not per message; no timer ever holds a message back.
	LowLatency Mode = iota
	// HighThroughput copies messages into pages behind an 8-byte length
	// and sends whole pages (NetIO's high-throughput, buffered socket): a
	// page goes out when it is full, on Flush, when the writer pauses
	// (unless Config.NoIdleFlush) and at the latest after
	// Config.FlushInterval. Small messages then cost a copy, not a fabric
	// operation each.
	HighThroughput
)

var modeNames = [...]string{"low-latency", "high-throughput"}

// String returns the mode's name: "low-latency" or "high-throughput".
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode returns the mode named s: "low-latency" (or "ll") or
// "high-throughput" (or "ht"), in any case; the constants' own names,
// "LowLatency" and "HighThroughput", are taken too. Any other s is an
// error that wraps ErrInvalidConfig.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(s) {
	case "low-latency", "ll", "lowlatency":
		return LowLatency, nil
	case "high-throughput", "ht", "highthroughput":
		return HighThroughput, nil
	}
	return 0, invalid("unknown mode %q (want low-latency or high-throughput)", s)
}

// MarshalText implements encoding.TextMarshaler: the mode's name, as
// String gives it, so that a Mode in a JSON, YAML or TOML configuration
// reads "low-latency" or "high-throughput". A mode that does not exist is
// an error that wraps ErrInvalidConfig.
func (m Mode) MarshalText() ([]byte, error) {
	if err := checkMode(m); err != nil {
		return nil, err
	}
	return []byte(modeNames[m]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseMode, so
// that flag.TextVar and configuration decoders take a mode by name. On an
// error m is left as it was.
func (m *Mode) UnmarshalText(text []byte) error {
	v, err := ParseMode(string(text))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// args are Dial's or Listen's arguments, checked.
type args struct {
	op, provider, address, host, port string
	cfg                               Config
}

func (a *args) opError(err error) error { return a.opErrorAs(a.op, err) }

// opErrorAs is opError for another operation on the same address.
func (a *args) opErrorAs(op string, err error) error {
	return &net.OpError{Op: op, Net: a.provider, Addr: stringAddr{a.provider, a.address}, Err: err}
}

// parseArgs applies the options and splits address; an empty host is
// defaultHost, as in the net package.
func parseArgs(op, network, address, defaultHost string, opts []Option) (*args, error) {
	a, err := parseOptions(op, network, address, opts)
	if err != nil {
		return nil, err
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

// parseOptions applies the options, leaving the address as it is.
func parseOptions(op, network, address string, opts []Option) (*args, error) {
	a := &args{op: op, provider: provider(network), address: address}
	var err error
	if a.cfg, err = buildConfig(opts); err != nil {
		return nil, a.opError(err)
	}
	if err = a.cfg.resolveKey(); err != nil {
		return nil, a.opError(err)
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

// A Dialer dials connections configured by a Config: the struct form of
// Dial's options, for programs that fill a Config from flags or a file.
// The zero Dialer dials with every default. A Dialer may be used by
// several goroutines at once, as long as its Config does not change.
type Dialer struct {
	// Config configures each connection. Its zero fields mean their
	// defaults, exactly as with WithConfig; it is checked on every dial,
	// and a value out of range fails it with an error wrapping
	// ErrInvalidConfig.
	Config Config
}

// Dial connects to address on the named network, as Dial does, with the
// Dialer's Config.
func (d *Dialer) Dial(network, address string) (*Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

// DialContext connects to address on the named network, as DialContext
// does, with the Dialer's Config: set-up is bounded by ctx and by
// Config.ConnectTimeout, whichever ends first.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (*Conn, error) {
	return DialContext(ctx, network, address, WithConfig(d.Config))
}

// A ListenConfig opens Listeners configured by a Config: the struct form
// of Listen's options, the counterpart of Dialer. The zero ListenConfig
// listens with every default.
type ListenConfig struct {
	// Config configures the listener and every connection it accepts. Its
	// zero fields mean their defaults, exactly as with WithConfig; a value
	// out of range fails Listen with an error wrapping ErrInvalidConfig.
	Config Config
}

// Listen listens on address over the provider named by network, as Listen
// does, with the ListenConfig's Config. Opening a passive endpoint does
// not wait for a peer, so ctx bounds little: a ctx that has already ended
// fails Listen at once (with a *net.OpError wrapping ctx.Err()), and ctx
// bounds the host lookup that explains an address libfabric could not
// resolve.
func (lc *ListenConfig) Listen(ctx context.Context, network, address string) (*Listener, error) {
	return listenConns(ctx, network, address, []Option{WithConfig(lc.Config)})
}

// Errors reported by connections, wrapped in *net.OpError.
var (
	// ErrMessageTooLarge is returned by Write for a message above the
	// connection's maximum, and closes a connection whose peer sends one.
	ErrMessageTooLarge = wire.ErrMessageTooLarge
	// ErrProtocol closes a connection whose peer broke the wire protocol
	// (a truncated or lying header, an unknown control message, credits it
	// was never owed).
	ErrProtocol = wire.ErrProtocol
	// ErrRejected is returned by Dial when the listener refused the
	// connection: its backlog was full, it holds Config.MaxConns
	// connections, it could not afford the connection's memory or
	// descriptors, it uses the other Mode, or it is closing. Dial and
	// Subscribe return it too when admission failed: the two sides' keys
	// differ, or one side has none (Config.Key, Config.KeyFile,
	// Config.Insecure); the error says where this side's key came from.
	ErrRejected = errors.New("netio: connection rejected")
	// ErrMemoryLimit is returned by Dial, and counted by a Listener, when
	// a connection's registered buffers would take the process past
	// MaxRegisteredMemory.
	ErrMemoryLimit = budget.ErrLimit
	// ErrWouldBlock is returned by TryWrite when the message does not fit
	// in the free send buffers (NetIO's AGAIN), and by a Write made from
	// Config.OnMessage (on the reactor) when the peer has no room: waiting
	// there would stop the reactor that makes the room.
	ErrWouldBlock = errors.New("netio: write would block")
	// ErrPeerTimeout ends a connection whose peer was not heard from for
	// Config.HeartbeatTimeout: it stopped, hung, lost power or its
	// network, and nothing told this side. Blocked reads and writes
	// return it at once, in a *net.OpError whose message says how long
	// the peer was silent. It also matches syscall.ETIMEDOUT, which a TCP
	// socket reports when its keep-alive finds the same, and its
	// Timeout() is true; it is not os.ErrDeadlineExceeded, so that a
	// loop that reads again after its own deadline passed does not spin
	// on a dead connection. A subscription reconnects after it.
	ErrPeerTimeout = errors.New("netio: peer not heard from")
)

// registered is the process's registered memory: Config bounds one
// connection (MaxConnMemory); this bounds them all.
var registered budget.Budget

// SetMaxRegisteredMemory sets the most memory, in bytes, that the
// process's connections may register together, and returns the previous
// limit. A connection whose buffers would go past it is not made: Dial
// fails with ErrMemoryLimit, and a Listener or Publisher rejects the
// request at the handshake (ErrRejected at the dialer) before allocating
// anything. Connections already made are not affected. A negative n
// changes nothing, so SetMaxRegisteredMemory(-1) reads the limit.
//
// The default is half the machine's physical memory (as sysinfo(2)
// reports it): registered buffers become resident as peers fill them, and
// the process needs memory besides. With the LowLatency defaults a
// connection registers 8 MiB, so 4 GiB holds 512 of them.
func SetMaxRegisteredMemory(n int64) int64 {
	return registered.SetLimit(n)
}

// RegisteredMemory returns how many bytes the process's connections have
// registered now.
func RegisteredMemory() int64 { return registered.Used() }

// checkLockedMemory checks, before set-up, that a connection of cfg on
// info's provider can pin its buffers, one window each way, under the
// process's locked-memory limit.
func checkLockedMemory(info *ofi.Info, cfg *Config) error {
	return registered.CheckLockedMemory(info.Provider(), info.PinsMemory(), 2*int64(cfg.BufferSize)*int64(cfg.Window))
}
