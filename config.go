package netio

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"strings"
	"time"

	"github.com/netio-go/netio/internal/wire"
)

// Config configures a Listener or a connection. The zero value is ready to
// use: every zero field means the default named in its comment.
type Config struct {
	// Mode is LowLatency (the zero value) or HighThroughput.
	Mode Mode
	// BufferSize is the size in bytes of each receive buffer this side
	// posts; the peer sizes what it sends to fit, and a larger message goes
	// on in the next buffers. A buffer (a page: LowLatency packs its
	// messages into pages too) carries BufferSize bytes of messages: it adds the page's
	// header and one message's length prefix (24 bytes; 40 with pub/sub's
	// tag and sequence number), up to MaxBufferSize, so that a message of
	// BufferSize bytes travels whole in one page. At least 4 KiB, at most
	// MaxBufferSize. Zero means the default of the Mode:
	//
	//	LowLatency      DefaultBufferSize  256 KiB
	//	HighThroughput  DefaultPageSize      1 MiB  (a page)
	BufferSize int
	// Window is the number of receive buffers (pages) this side posts, so
	// the number of messages (pages) the peer may have in flight. At
	// least 4, at most MaxWindow. Zero means the default of the Mode:
	//
	//	LowLatency      DefaultWindow  16 buffers
	//	HighThroughput  DefaultPages    8 pages
	//
	// A connection's registered memory is bounded by BufferSize × Window
	// (pages: plus their 24 or 40 bytes each) for receiving plus as much
	// for sending: 2 × 8 × 1 MiB = 16 MiB with
	// the HighThroughput defaults, 2 × 16 × 256 KiB = 8 MiB with the
	// LowLatency ones. That bound may not pass MaxConnMemory, and every
	// connection's buffers count against the process's
	// MaxRegisteredMemory.
	Window int
	// FlushInterval is how long a partly filled page may wait before it
	// is sent (HighThroughput mode). Zero means DefaultFlushInterval.
	FlushInterval time.Duration
	// NoIdleFlush keeps a partly filled page until it is full, Flush is
	// called or FlushInterval passes, as NetIO does (HighThroughput
	// mode). By default the page also goes out as soon as the writer
	// pauses, which costs nothing while it writes without pause (pages
	// fill) and keeps a slow writer's messages from waiting up to
	// FlushInterval: a lone message arrives in tens of microseconds
	// instead of after FlushInterval.
	NoIdleFlush bool
	// MaxMessageSize is the largest message this side sends or accepts;
	// the smaller of the two sides' values applies to each direction. At
	// most MaxMaxMessageSize. Zero means DefaultMaxMessageSize.
	MaxMessageSize int
	// ConnectTimeout bounds connection set-up: a Dial's, when its context
	// has no earlier deadline, and that of each connection a Listener or
	// Publisher accepts, which is dropped (and counted in its Stats) if
	// the peer has not completed the handshake by then. Zero means
	// DefaultConnectTimeout.
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
	// Backlog is the number of connections a Listener holds for Accept;
	// a request beyond it is rejected (ErrRejected at the dialer). At most
	// MaxBacklog. Zero means DefaultBacklog.
	Backlog int
	// MaxConns is the number of connections a Listener or Publisher holds
	// at once: being set up, waiting for Accept, and accepted and not yet
	// closed (a Publisher's subscribers). A request beyond it is rejected
	// at the handshake, before anything is allocated for it. Zero means
	// DefaultMaxConns.
	MaxConns int
	// MaxTags is the number of tags one subscriber's connection may hold
	// at a Publisher (ListenPublisher only); a subscription past it fails
	// with ErrRejected. At most MaxMaxTags. Zero means DefaultMaxTags.
	MaxTags int
	// Policy is what a subscription does when its subscriber falls behind
	// (Subscribe only). Zero means Block: lossless.
	Policy Policy
	// SubscriptionBuffer is how many messages a Subscription's channel
	// holds for its reader (Subscribe only). Zero means
	// DefaultSubscriptionBuffer.
	SubscriptionBuffer int
	// SlowSubscriberLimit is how long a publisher lets a Block subscriber
	// hold the others back (ListenPublisher only): when a Publish finds
	// the subscriber's window full and it stays full this long, the
	// subscriber is cut loose (it reconnects by itself and counts what it
	// missed). Zero means DefaultSlowSubscriberLimit; a negative value
	// waits for ever, bounded only by each Publish's context.
	SlowSubscriberLimit time.Duration
	// WaitForPublisher makes Subscribe keep trying, until its context
	// ends, when the publisher is not up yet (Subscribe only). False (the
	// default) fails Subscribe at the first refusal.
	WaitForPublisher bool
	// MaxReconnects bounds the tries a subscription makes to connect
	// again after losing its publisher; once they are used up, C closes
	// and Err says why (Subscribe only). Zero means no limit.
	MaxReconnects int
	// MaxReconnectTime bounds how long a subscription tries to connect
	// again after losing its publisher (Subscribe only), as MaxReconnects.
	// Zero means no limit.
	MaxReconnectTime time.Duration
	// EventBuffer is how many events a Subscription's or Publisher's
	// Events channel holds; events that find it full are dropped and
	// counted, never waited for. Zero means DefaultEventBuffer.
	EventBuffer int
	// Key is the pre-shared key of 16 to 64 bytes that admits a
	// connection: a Listener or Publisher takes only peers that prove they
	// hold the same key, and turns every other away before it posts any
	// buffer for them, before libfabric reads a byte of their data; a Dial
	// or Subscribe connects only to a listener that proves it holds it. A
	// peer that fails is rejected with an error wrapping ErrRejected.
	// Connection requests carry a timestamp and are refused more than
	// 30 s from the listener's clock, or when replayed. The key
	// authenticates connection set-up only: the data that follows is
	// neither encrypted nor authenticated, and a peer that holds the key
	// is trusted. Nil (the default) means the key in KeyFile.
	Key []byte
	// KeyFile names the file that holds the key when Key is nil: the
	// file's content, less a text file's line end, readable by its owner
	// only (see ReadKeyFile). Empty (the default) means the file named by
	// $NETIO_KEY_FILE, or, when that is unset, DefaultKeyFile, a per-user
	// file that netio makes with a new random key on first use: the
	// processes of one user on one host, or on hosts that share the home
	// directory, then admit each other and nobody else with no
	// configuration. Other hosts need a copy of the file. Listen, Dial,
	// ListenPublisher and Subscribe fail with an error wrapping ErrNoKey,
	// naming the file and what to do, when they can read or make none.
	KeyFile string
	// Insecure turns admission off: no key is read, sent or asked for,
	// and the listener rejects a peer that sends one. Risk: any host
	// that can reach the port then connects, and libfabric 1.17's tcp
	// provider trusts what its peer sends, so a connected peer can crash
	// the process with a forged header. Set it only where every host that
	// can reach the port is trusted, and on both sides. False (the
	// default) means a key.
	Insecure bool
	// keySource says where Key came from, for the errors of a failed
	// admission; set with the key.
	keySource keySource
	// HeartbeatTimeout is how long a connection waits without hearing
	// anything from its peer before it ends with ErrPeerTimeout: a peer
	// that stopped or hung, or whose network was cut, which the transport
	// notices only when the kernel gives up retransmitting (about 15
	// minutes). Anything received counts, and a peer whose reader does
	// not read is still heard. Zero means DefaultHeartbeatTimeout; a
	// negative value turns the check off (this side then still sends the
	// heartbeats a checking peer asks for). It must be at least twice
	// HeartbeatInterval: heartbeats may come up to half an interval late.
	HeartbeatTimeout time.Duration
	// HeartbeatInterval is how long a connection may send nothing before
	// it sends a heartbeat, a message of 16 bytes. Its peer asks, in its
	// own heartbeats, for one at least every third of its timeout, and
	// gets it. Zero means DefaultHeartbeatInterval, or a fifth of
	// HeartbeatTimeout when that is shorter. At least 10 ms.
	HeartbeatInterval time.Duration
	// OnMessage, when set, is NetIO's low-latency receive socket: every
	// message is handed to it on the reactor thread as soon as it
	// arrives, skipping the hop to a reading goroutine, and Read and
	// ReadMessage are not used. msg is valid only during the call. It must
	// return quickly and never block: it stalls every connection of the
	// process while it runs. It may call Write: when the peer has no room,
	// Write returns ErrWouldBlock there instead of waiting.
	OnMessage func(c *Conn, msg []byte)
	// Domain names the libfabric domain the connections use: on a host
	// with several NICs, the device (verbs: "mlx5_1"), or for tcp and
	// sockets the interface ("eth0", "lo"). A listener on every address
	// then listens on that domain's address, and a Dial connects from
	// it. Listen and Dial fail with an *UnknownDomainError listing the
	// provider's domains if it has none of that name. Empty (the
	// default) means the first that libfabric offers for the address.
	Domain string
	// Logger, if not nil, is told of connection-level events: set-up
	// failures, connections that fail (a peer that timed out among them),
	// requests a listener rejects, subscribers cut loose as slow. It is
	// called from a goroutine of netio's, never on a path that moves
	// messages. nil (the zero value): no logging.
	Logger *slog.Logger
}

// Policy is what a subscription does when its subscriber is slower than
// the publisher. Every message carries its sequence number, so whatever is
// lost shows as a gap, and the Subscription's Stats count it.
type Policy uint8

const (
	// Block is lossless: when the subscriber falls behind, the publisher's
	// Publish waits for it, bounded by Publish's context and by the
	// publisher's Config.SlowSubscriberLimit, past which the subscriber
	// is cut loose (it reconnects, and counts what it missed).
	Block Policy = iota
	// DropOldest keeps the publisher and the other subscribers at full
	// rate: when the subscription's buffer is full, the oldest message in
	// it makes room for the new one.
	DropOldest
	// DropNewest keeps the publisher and the other subscribers at full
	// rate: when the subscription's buffer is full, the new message is
	// dropped.
	DropNewest
)

var policyNames = [...]string{"block", "drop-oldest", "drop-newest"}

// String returns the policy's name.
func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// ParsePolicy returns the policy named s: "block", "drop-oldest" or
// "drop-newest", in any case; the constants' own names ("DropOldest") are
// taken too. Any other s is an error that wraps ErrInvalidConfig.
func ParsePolicy(s string) (Policy, error) {
	switch strings.ToLower(s) {
	case "block":
		return Block, nil
	case "drop-oldest", "dropoldest":
		return DropOldest, nil
	case "drop-newest", "dropnewest":
		return DropNewest, nil
	}
	return 0, invalid("unknown policy %q (want block, drop-oldest or drop-newest)", s)
}

// MarshalText implements encoding.TextMarshaler: the policy's name, as
// String gives it. A policy that does not exist is an error that wraps
// ErrInvalidConfig.
func (p Policy) MarshalText() ([]byte, error) {
	if err := checkPolicy(p); err != nil {
		return nil, err
	}
	return []byte(policyNames[p]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParsePolicy, for
// flag.TextVar and configuration decoders. On an error p is left as it
// was.
func (p *Policy) UnmarshalText(text []byte) error {
	v, err := ParsePolicy(string(text))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

func checkPolicy(p Policy) error {
	if p > DropNewest {
		return invalid("unknown policy %d", p)
	}
	return nil
}

// WithPolicy sets Config.Policy.
func WithPolicy(p Policy) Option {
	return func(c *Config) error { c.Policy = p; return checkPolicy(p) }
}

// WithSubscriptionBuffer sets Config.SubscriptionBuffer.
func WithSubscriptionBuffer(n int) Option {
	return func(c *Config) error { c.SubscriptionBuffer = n; return checkPositive("subscription buffer", int64(n)) }
}

// Defaults of publish/subscribe's Config fields.
const (
	// DefaultSlowSubscriberLimit is Config.SlowSubscriberLimit: how long a
	// Block subscriber whose window is full may hold a Publish, and with
	// it the other subscribers of the tag, before the publisher cuts it
	// loose.
	DefaultSlowSubscriberLimit = 3 * time.Second
	// DefaultEventBuffer is Config.EventBuffer: the events a Subscription
	// or Publisher holds for a reader of Events.
	DefaultEventBuffer = 64
)

func (c *Config) setPubSubDefaults() {
	orDefault(&c.SlowSubscriberLimit, DefaultSlowSubscriberLimit)
	orDefault(&c.EventBuffer, DefaultEventBuffer)
}

func (c *Config) checkPubSub() error {
	switch {
	case c.MaxReconnects < 0:
		return invalid("reconnect limit %d is negative (0 is no limit)", c.MaxReconnects)
	case c.MaxReconnectTime < 0:
		return invalid("reconnect time %v is negative (0 is no limit)", c.MaxReconnectTime)
	}
	return checkPositive("event buffer", int64(c.EventBuffer))
}

// WithSlowSubscriberLimit sets Config.SlowSubscriberLimit. A d of zero or
// less waits for ever: a Block subscriber that stops reading then holds
// every Publish of its tags for as long as the Publish's context allows.
func WithSlowSubscriberLimit(d time.Duration) Option {
	return func(c *Config) error {
		if d <= 0 {
			d = -1
		}
		c.SlowSubscriberLimit = d
		return nil
	}
}

// WithWaitForPublisher sets Config.WaitForPublisher: Subscribe keeps
// trying until its context ends when the publisher is not up yet.
func WithWaitForPublisher() Option {
	return func(c *Config) error { c.WaitForPublisher = true; return nil }
}

// WithMaxReconnects sets Config.MaxReconnects; 0 is no limit.
func WithMaxReconnects(n int) Option {
	return func(c *Config) error {
		c.MaxReconnects = n
		if n < 0 {
			return invalid("reconnect limit %d is negative (0 is no limit)", n)
		}
		return nil
	}
}

// WithMaxReconnectTime sets Config.MaxReconnectTime; 0 is no limit.
func WithMaxReconnectTime(d time.Duration) Option {
	return func(c *Config) error {
		c.MaxReconnectTime = d
		if d < 0 {
			return invalid("reconnect time %v is negative (0 is no limit)", d)
		}
		return nil
	}
}

// WithEventBuffer sets Config.EventBuffer.
func WithEventBuffer(n int) Option {
	return func(c *Config) error { c.EventBuffer = n; return checkPositive("event buffer", int64(n)) }
}

// Option changes a Config; it returns an error, wrapping ErrInvalidConfig,
// for a value out of range.
type Option func(*Config) error

// ErrInvalidConfig is wrapped by the error of an option, or of a Config
// given with WithConfig, whose value is out of range.
var ErrInvalidConfig = errors.New("netio: invalid configuration")

// Ceilings of the Config fields: a larger value is an error that wraps
// ErrInvalidConfig, so that no configuration, and no peer that offers
// one, makes a connection commit memory without bound.
const (
	// MaxBufferSize is the largest Config.BufferSize: the largest buffer
	// a Window of 4 can post within MaxConnMemory.
	MaxBufferSize = 128 << 20
	// MaxWindow is the largest Config.Window.
	MaxWindow = 4096
	// MaxConnMemory bounds the memory one connection registers, both
	// directions together: 2 × Config.BufferSize × Config.Window may not
	// exceed it (pages add their 24 or 40 bytes each: see BufferSize).
	// Without it, WithBufferSize(1 GiB) made one connection map 67 GB of
	// address space.
	MaxConnMemory = 1 << 30
	// MaxMaxMessageSize is the largest Config.MaxMessageSize: a message
	// received in several buffers is joined in memory of its size, so
	// that size needs a bound too.
	MaxMaxMessageSize = 1 << 30
	// MaxBacklog is the largest Config.Backlog: the queue is allocated
	// when the Listener starts (a backlog of 1e9 took Listen 40 s).
	MaxBacklog = 1 << 16
	// MaxMaxTags is the largest Config.MaxTags.
	MaxMaxTags = 1 << 20
)

// Each field's range is checked in one place: by its option, and again on
// the final Config (which WithConfig may have filled) before it is used.
const (
	minBufferSize = wire.MinBufferSize
	maxBufferSize = MaxBufferSize
	minWindow     = wire.MinWindow
	maxWindow     = MaxWindow
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// nilOption is the error for a nil Option, the i-th of its call.
func nilOption(i int) error { return invalid("option %d is nil", i) }

func checkMode(m Mode) error {
	if m > HighThroughput {
		return invalid("unknown mode %d", m)
	}
	return nil
}

func checkBufferSize(n int) error {
	if n < minBufferSize || n > maxBufferSize {
		return invalid("buffer size %d out of range [4 KiB, %d MiB]", n, maxBufferSize>>20)
	}
	return nil
}

func checkWindow(n int) error {
	if n < minWindow || n > maxWindow {
		return invalid("window %d out of range [%d, %d]", n, minWindow, maxWindow)
	}
	return nil
}

// checkConnMemory checks what a connection of buffers of size bytes,
// window of them in each direction, registers.
func checkConnMemory(size, window int) error {
	if n := 2 * int64(size) * int64(window); n > MaxConnMemory {
		return invalid("buffer size %d × window %d × 2 directions = %d MiB of registered memory per connection, above MaxConnMemory (%d MiB)", size, window, n>>20, MaxConnMemory>>20)
	}
	return nil
}

func checkPositive(what string, n int64) error {
	if n <= 0 {
		return invalid("%s must be positive", what)
	}
	return nil
}

// checkRange checks that n is in [1, max].
func checkRange(what string, n, max int64) error {
	if n <= 0 || n > max {
		return invalid("%s %d out of range [1, %d]", what, n, max)
	}
	return nil
}

// WithMode sets Config.Mode.
func WithMode(m Mode) Option {
	return func(c *Config) error { c.Mode = m; return checkMode(m) }
}

// WithFlushInterval sets Config.FlushInterval.
func WithFlushInterval(d time.Duration) Option {
	return func(c *Config) error { c.FlushInterval = d; return checkPositive("flush interval", int64(d)) }
}

// WithNoIdleFlush sets Config.NoIdleFlush.
func WithNoIdleFlush() Option {
	return func(c *Config) error { c.NoIdleFlush = true; return nil }
}

// WithConfig replaces the whole configuration with c, whose zero fields
// mean their defaults. It must come before any other option, which may
// then adjust it: after one, it would silently undo what that option set,
// so it returns an error instead.
func WithConfig(c Config) Option {
	return func(dst *Config) error {
		if !reflect.ValueOf(*dst).IsZero() {
			return invalid("WithConfig replaces the whole Config: give it before the other options")
		}
		*dst = c
		return nil
	}
}

// WithBufferSize sets Config.BufferSize.
func WithBufferSize(n int) Option {
	return func(c *Config) error { c.BufferSize = n; return checkBufferSize(n) }
}

// WithWindow sets Config.Window.
func WithWindow(n int) Option {
	return func(c *Config) error { c.Window = n; return checkWindow(n) }
}

// WithMaxMessageSize sets Config.MaxMessageSize.
func WithMaxMessageSize(n int) Option {
	return func(c *Config) error { c.MaxMessageSize = n; return checkMaxMessageSize(n) }
}

func checkMaxMessageSize(n int) error {
	return checkRange("maximum message size", int64(n), MaxMaxMessageSize)
}

// WithConnectTimeout sets Config.ConnectTimeout.
func WithConnectTimeout(d time.Duration) Option {
	return func(c *Config) error { c.ConnectTimeout = d; return checkPositive("connect timeout", int64(d)) }
}

// WithLinger sets Config.Linger.
func WithLinger(d time.Duration) Option {
	return func(c *Config) error { c.Linger = d; return checkPositive("linger", int64(d)) }
}

// WithBacklog sets Config.Backlog.
func WithBacklog(n int) Option {
	return func(c *Config) error { c.Backlog = n; return checkRange("backlog", int64(n), MaxBacklog) }
}

// WithMaxConns sets Config.MaxConns.
func WithMaxConns(n int) Option {
	return func(c *Config) error { c.MaxConns = n; return checkPositive("connection limit", int64(n)) }
}

// WithMaxTags sets Config.MaxTags.
func WithMaxTags(n int) Option {
	return func(c *Config) error { c.MaxTags = n; return checkRange("tag limit", int64(n), MaxMaxTags) }
}

// WithOnMessage sets Config.OnMessage.
func WithOnMessage(f func(c *Conn, msg []byte)) Option {
	return func(c *Config) error { c.OnMessage = f; return nil }
}

// WithHeartbeatTimeout sets Config.HeartbeatTimeout; a negative d turns
// the check for a silent peer off.
func WithHeartbeatTimeout(d time.Duration) Option {
	return func(c *Config) error { c.HeartbeatTimeout = d; return nil }
}

// WithHeartbeatInterval sets Config.HeartbeatInterval.
func WithHeartbeatInterval(d time.Duration) Option {
	return func(c *Config) error { c.HeartbeatInterval = d; return checkHeartbeatInterval(d) }
}

func checkHeartbeatInterval(d time.Duration) error {
	if d < minBeatInterval {
		return invalid("heartbeat interval %v below %v", d, minBeatInterval)
	}
	return nil
}

// checkHeartbeat checks the two heartbeat settings together.
func checkHeartbeat(interval, timeout time.Duration) error {
	if err := checkHeartbeatInterval(interval); err != nil {
		return err
	}
	if timeout > 0 && timeout < 2*interval {
		return invalid("heartbeat timeout %v is less than twice the interval %v", timeout, interval)
	}
	return nil
}

// WithPollFor sets Config.PollFor.
func WithPollFor(d time.Duration) Option {
	return func(c *Config) error { c.PollFor = d; return nil }
}

// buildConfig applies the options, fills in the defaults and checks the
// result. The key is not read here (resolveKey).
func buildConfig(opts []Option) (Config, error) {
	var c Config
	for i, o := range opts {
		if o == nil {
			return c, nilOption(i)
		}
		if err := o(&c); err != nil {
			return c, err
		}
	}
	c.setDefaults()
	return c, c.validate()
}

// WithKeyFile sets Config.KeyFile.
func WithKeyFile(path string) Option {
	return func(c *Config) error {
		c.KeyFile = path
		if path == "" {
			return invalid("empty key file name")
		}
		return nil
	}
}

// WithInsecure sets Config.Insecure: no key, and any peer that reaches
// the port connects. See Config.Insecure for the risk.
func WithInsecure() Option {
	return func(c *Config) error { c.Insecure = true; return nil }
}

// checkKeyChoice checks that a Config asks for one key at most.
func checkKeyChoice(c *Config) error {
	switch {
	case c.Insecure && (len(c.Key) > 0 || c.KeyFile != ""):
		return invalid("Insecure with a key: choose one")
	case len(c.Key) > 0 && c.KeyFile != "":
		return invalid("both Key and KeyFile: choose one")
	}
	return nil
}

// setDefaults gives every zero field its default.
func (c *Config) setDefaults() {
	size, window := DefaultBufferSize, DefaultWindow
	if c.Mode == HighThroughput {
		size, window = DefaultPageSize, DefaultPages
	}
	orDefault(&c.BufferSize, size)
	orDefault(&c.Window, window)
	orDefault(&c.FlushInterval, DefaultFlushInterval)
	orDefault(&c.MaxMessageSize, DefaultMaxMessageSize)
	orDefault(&c.ConnectTimeout, DefaultConnectTimeout)
	orDefault(&c.Linger, DefaultLinger)
	orDefault(&c.Backlog, DefaultBacklog)
	orDefault(&c.MaxConns, DefaultMaxConns)
	orDefault(&c.MaxTags, DefaultMaxTags)
	orDefault(&c.SubscriptionBuffer, DefaultSubscriptionBuffer)
	c.setPubSubDefaults()
	orDefault(&c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
		if c.HeartbeatTimeout > 0 {
			c.HeartbeatInterval = min(c.HeartbeatInterval, max(c.HeartbeatTimeout/5, minBeatInterval))
		}
	}
}

// orDefault sets *v to d when it is zero.
func orDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// validate checks a Config with its defaults filled in.
func (c *Config) validate() error {
	for _, err := range []error{
		checkMode(c.Mode),
		checkBufferSize(c.BufferSize),
		checkWindow(c.Window),
		checkConnMemory(c.BufferSize, c.Window),
		checkMaxMessageSize(c.MaxMessageSize),
		checkPositive("flush interval", int64(c.FlushInterval)),
		checkPositive("connect timeout", int64(c.ConnectTimeout)),
		checkPositive("linger", int64(c.Linger)),
		checkRange("backlog", int64(c.Backlog), MaxBacklog),
		checkPositive("connection limit", int64(c.MaxConns)),
		checkRange("tag limit", int64(c.MaxTags), MaxMaxTags),
		checkPolicy(c.Policy),
		checkPositive("subscription buffer", int64(c.SubscriptionBuffer)),
		c.checkPubSub(),
		checkKey(c.Key),
		checkKeyChoice(c),
		checkHeartbeat(c.HeartbeatInterval, c.HeartbeatTimeout),
	} {
		if err != nil {
			return err
		}
	}
	if c.Mode == HighThroughput && c.OnMessage != nil {
		// Pages are decoded in the reading goroutine, never on the
		// reactor; OnMessage is the low-latency receive path.
		return invalid("OnMessage needs LowLatency mode")
	}
	return nil
}

// pollFor is how long a waiting Read or Write of a connection with c polls.
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
