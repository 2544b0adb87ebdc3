package netio

import "context"

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
