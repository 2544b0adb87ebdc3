package netio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/netio-go/netio/internal/admit"
	"github.com/netio-go/netio/internal/lifecycle"
	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/ofi"
)

// acceptor is a passive endpoint that answers connection requests, for a
// Listener or a Publisher: the connection manager (connmgr.go) checks each
// request's hello and key on its own thread and rejects what its owner
// does not take, and the reactor applies the owner's limits to the rest,
// so that no endpoint or buffer is made for a peer that will be turned
// away.
type acceptor struct {
	eng     *engine
	cm      *connManager
	network string
	addr    Addr
	mode    Mode
	anyMode bool      // peers may use either mode (a publisher's subscribers)
	role    wire.Role // what the peers must be
	auth    admit.Checker
	owner   acceptorOwner
	stats   acceptStats
	logger  *slog.Logger // Config.Logger

	maxConns     int           // Config.MaxConns
	setupTimeout time.Duration // Config.ConnectTimeout

	// closed is set on the reactor by close; the manager reads it too.
	closed atomic.Bool
	// done is closed once the passive endpoint is closed and its port
	// free (sealed).
	done chan struct{}

	// The queue is read by the manager's thread from start to close, and
	// belongs to the reactor before and after; its Reject is called on
	// the reactor in between, which the queue allows.
	q     *ofi.ListenQueue
	watch *listenWatch

	// Reactor only.
	fab *fabricRes
	// rdm, on a reliable-datagram provider, is the endpoint requests come
	// to in-band, in place of q and the manager (rdm_link.go).
	rdm *rdmEndpoint
}

// acceptStats count what an acceptor did with the requests it got; conns
// is written on the reactor only, the counters from there and from the
// sweep of set-up deadlines (also on the reactor).
type acceptStats struct {
	accepted, rejectedFull, rejectedMemory, rejectedPeer atomic.Uint64
	rejectedAuth, incomplete                             atomic.Uint64
	failed, timedOut, acceptPauses                       atomic.Uint64
	conns, pendingRequests                               atomic.Int64
}

// ListenerStats are the counters of a Listener's connection set-up since
// it started (a Publisher's too, in PublisherStats): what it accepted,
// what it turned away at the handshake and why, and what failed on the
// way. They are what a listening application has to learn of requests
// that never reach Accept.
type ListenerStats struct {
	// Accepted counts connections set up: queued for Accept, or a
	// Publisher's subscribers.
	Accepted uint64
	// Requests rejected at the handshake, before anything was allocated
	// for them, by reason: the Backlog or Config.MaxConns was full; the
	// connection's buffers would have taken the process past
	// MaxRegisteredMemory; the peer was not a netio peer of this
	// protocol version, or asked for the other Mode or the wrong role.
	RejectedFull   uint64
	RejectedMemory uint64
	RejectedPeer   uint64
	// RejectedAuth counts requests that failed admission (Config.Key):
	// no key where the listener has one, a key where it has none, a
	// wrong key, a request more than 30 s off this clock, or a replay.
	RejectedAuth uint64
	// Failed counts requests admitted whose connection was never set up:
	// the peer left, or did not complete the handshake within
	// Config.ConnectTimeout (TimedOut, which Failed includes), or the
	// endpoint could not be made (out of file descriptors or memory; the
	// peer is rejected then).
	Failed   uint64
	TimedOut uint64
	// Incomplete counts connections that never completed a connection
	// request: they sent nothing, or less than a request, within
	// Config.ConnectTimeout, or more of them waited than Config.MaxConns
	// (the oldest went), or their peer closed before it was done. The
	// listener resets them (tcp).
	Incomplete uint64
	// AcceptPauses counts the times the listener stopped taking requests
	// for a while (5 ms, doubling up to 1 s) because the process had no
	// free file descriptor, instead of spinning on a listening socket it
	// could not accept from. Requests wait in the kernel meanwhile; their
	// Dials may time out.
	AcceptPauses uint64
	// Conns is the number of connections held now: being set up, waiting
	// for Accept, or accepted and not yet closed. Config.MaxConns bounds
	// it.
	Conns int
	// PendingRequests is the number of connections the transport took
	// whose connection request has not arrived whole yet (tcp): each
	// holds a socket until its request completes, at most
	// Config.ConnectTimeout, and at most Config.MaxConns of them wait.
	PendingRequests int
}

func (s *acceptStats) snapshot() ListenerStats {
	return ListenerStats{
		Accepted:        s.accepted.Load(),
		RejectedFull:    s.rejectedFull.Load(),
		RejectedMemory:  s.rejectedMemory.Load(),
		RejectedPeer:    s.rejectedPeer.Load(),
		RejectedAuth:    s.rejectedAuth.Load(),
		Incomplete:      s.incomplete.Load(),
		Failed:          s.failed.Load(),
		TimedOut:        s.timedOut.Load(),
		AcceptPauses:    s.acceptPauses.Load(),
		Conns:           int(s.conns.Load()),
		PendingRequests: int(s.pendingRequests.Load()),
	}
}

// acceptorOwner takes the requests an acceptor lets through. On the reactor.
type acceptorOwner interface {
	// admit answers a request whose hello passed and that the acceptor's
	// limits allow: it accepts it (through acceptor.accept, which rejects
	// it itself if the link cannot be made) and returns nil, or returns
	// the data to reject it with.
	admit(req *peerRequest, h wire.Hello) (reject []byte)
}

// peerRequest is a connection request as an acceptor's owner sees it:
// a connected endpoint's (info), or one that came in-band to a
// reliable-datagram endpoint (rdm, from the dialer's link peerID at
// peer), so that Listener and Publisher admit either the same way.
type peerRequest struct {
	info   *ofi.Info
	rdm    *rdmEndpoint
	peer   ofi.FIAddr
	peerID uint32
	local  bool // the dialer is of this process (RDM)
}

// reject answers req with data.
func (a *acceptor) reject(req *peerRequest, data []byte) {
	if req.rdm != nil {
		req.rdm.sendHello(req.peer, &wire.RDMHello{Kind: wire.RDMReject, From: wire.RDMMaxID, To: req.peerID, Data: data}, nil)
		return
	}
	a.q.Reject(req.info, data)
}

var (
	rejectData      = []byte(wire.RejectMarker)
	rejectModeData  = []byte(wire.RejectModeMarker)
	rejectRoleData  = []byte(wire.RejectRoleMarker)
	rejectLimitData = []byte(wire.RejectLimitMarker)
)

// listen resolves address and opens the passive endpoint; Listen's and
// ListenPublisher's common part. The engine reference it takes is the
// owner's, given back by close.
func listen(op, network, address string, opts []Option, r wire.Role, owner func(*acceptor, Config) acceptorOwner) (*acceptor, Config, error) {
	return listenContext(context.Background(), op, network, address, opts, r, owner)
}

// listenContext is listen that fails at once when ctx has ended, and
// bounds the host lookup that explains a failed resolution by ctx.
func listenContext(ctx context.Context, op, network, address string, opts []Option, r wire.Role, owner func(*acceptor, Config) acceptorOwner) (*acceptor, Config, error) {
	if isRDMProvider(provider(network)) {
		return listenRDM(ctx, op, network, address, opts, r, owner)
	}
	a, err := parseArgs(op, network, address, "0.0.0.0", opts)
	if err != nil {
		return nil, Config{}, err
	}
	cfg, prov, host, port, opErr := a.cfg, a.provider, a.host, a.port, a.opError
	if err := ctx.Err(); err != nil {
		return nil, cfg, opErr(err)
	}
	if port == "" {
		port = "0"
	}
	infos, info, err := a.getInfo(ctx, ofi.Hints{Node: host, Service: port, Source: true})
	if err != nil {
		return nil, cfg, opErr(err)
	}
	defer infos.Free()
	if err := checkLockedMemory(info, &cfg); err != nil {
		return nil, cfg, opErr(err)
	}
	eng, err := acquireEngine()
	if err != nil {
		return nil, cfg, opErr(err)
	}
	cm, err := eng.connManager()
	if err != nil {
		eng.release()
		return nil, cfg, opErr(err)
	}
	ac := &acceptor{eng: eng, cm: cm, network: prov, mode: cfg.Mode, role: r, maxConns: cfg.MaxConns, setupTimeout: cfg.ConnectTimeout,
		auth: admit.Checker{Key: cfg.Key, Seen: replays}, done: make(chan struct{}), logger: cfg.Logger}
	ac.owner = owner(ac, cfg)
	var startErr error
	if err := eng.r.Call(func() { startErr = ac.start(info) }); err != nil {
		startErr = err
	}
	if startErr == nil {
		// From here on the manager reads the queue.
		if err := cm.r.Call(func() { startErr = ac.watch.start() }); err != nil {
			startErr = err
		}
		if startErr != nil {
			eng.r.Call(ac.release)
		}
	}
	if startErr != nil {
		eng.release()
		return nil, cfg, opErr(startErr)
	}
	return ac, cfg, nil
}

func (a *acceptor) start(info *ofi.Info) (err error) {
	e := a.eng
	if a.fab, err = e.fabricFor(info); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			a.release()
		}
	}()
	if a.q, err = a.fab.fabric.OpenListenQueue(info, 256, 0); err != nil {
		return err
	}
	a.q.Bound(a.setupTimeout, a.maxConns)
	ap, err := a.q.Addr()
	if err != nil {
		return err
	}
	a.addr = Addr{Provider: a.network, AddrPort: ap}
	a.watch = &listenWatch{m: a.cm, a: a, q: a.q}
	return nil
}

// screen checks a connection request's private data, which anyone may
// send: it returns the data to reject the request with, or nil for a hello
// its owner may admit. FuzzHello holds it to that.
func (a *acceptor) screen(data []byte) (wire.Hello, []byte) {
	h, err := wire.ParseHello(data)
	if err != nil || a.closed.Load() {
		return h, rejectData
	}
	// The key first, before anything else about the peer is looked at,
	// let alone an endpoint made for it (internal/admit).
	if h.Auth, err = a.auth.Check(data, time.Now()); err != nil {
		return h, rejectAuthData
	}
	switch {
	case Mode(h.Mode) != a.mode && !a.anyMode:
		return h, rejectModeData
	case h.Role != a.role:
		return h, rejectRoleData
	}
	return h, nil
}

// screenFailed counts and logs a request that screen turned away.
func (a *acceptor) screenFailed(reject []byte) {
	if a.closed.Load() {
		return
	}
	if string(reject) == wire.RejectAuthMarker {
		a.stats.rejectedAuth.Add(1)
		logRejected(a.logger, a.network, a.addr, "wrong key")
	} else {
		a.stats.rejectedPeer.Add(1)
		logRejected(a.logger, a.network, a.addr, "bad request")
	}
}

// admit applies the acceptor's own limit, then its owner's.
func (a *acceptor) admit(req *peerRequest, h wire.Hello) []byte {
	if a.stats.conns.Load() >= int64(a.maxConns) {
		a.stats.rejectedFull.Add(1)
		logRejected(a.logger, a.network, a.addr, "connection limit reached")
		return rejectLimitData
	}
	return a.owner.admit(req, h)
}

// affords reports whether the process's registered-memory budget has room
// for a link of lc to the peer of h, and counts the request as rejected if
// not. Checked before anything is made for the peer.
func (a *acceptor) affords(lc *linkConfig, h wire.Hello) bool {
	if registered.Affordable(lc.registers(h)) {
		return true
	}
	a.stats.rejectedMemory.Add(1)
	logRejected(a.logger, a.network, a.addr, "registered-memory budget spent")
	return false
}

// accept makes the link for an admitted request, with the engine
// reference the link holds (open builds it and its owner), and answers
// req: accepted, or rejected if the link could not be made. The link's
// set-up is then bounded by the acceptor's timeout, and it counts among
// the acceptor's connections until its owner reports it released.
func (a *acceptor) accept(req *peerRequest, h wire.Hello, open func(eng *engine) (*link, error)) (*link, error) {
	eng := a.eng
	eng.ref() // the link's own, as it may outlive the acceptor
	l, err := open(eng)
	if err == nil {
		a.stats.conns.Add(1) // the owner's released gives it back, also if accept fails
		if req.rdm != nil {
			err = l.acceptRDM(a, req, h) // watches its set-up before the accept goes
		} else {
			err = l.accept(a, req.info, h)
		}
	}
	if err != nil {
		eng.release()
		// Not accepted, so req's handle is still ours: the peer hears
		// why, unless the endpoint had already taken its socket.
		a.reject(req, rejectDataFor(err))
		if errors.Is(err, ErrMemoryLimit) {
			a.stats.rejectedMemory.Add(1)
		} else {
			a.stats.failed.Add(1)
		}
		return nil, err
	}
	if req.info != nil {
		req.info.Free()
		l.watchSetup(a.setupTimeout, &a.stats)
	}
	return l, nil
}

// domainInfo returns the entry to open the domain of a connection
// request's endpoint with: the listener's own, unless the request names
// another domain of the same provider (verbs listening on every address,
// where a request comes in on one of several NICs).
func (a *acceptor) domainInfo(req *ofi.Info) *ofi.Info {
	own := a.q.Info()
	if d := req.DomainName(); d != "" && d != own.DomainName() && req.Provider() == own.Provider() {
		return req
	}
	return own
}

// setUp is an accepted link up: it no longer has a set-up deadline. On
// the reactor.
func (a *acceptor) setUp(l *link) {
	l.forgetSetup()
	a.stats.accepted.Add(1)
}

// setupFailed is an accepted link that failed before it was up.
func (a *acceptor) setupFailed(l *link) {
	l.forgetSetup()
	a.stats.failed.Add(1)
}

// Accepted links have a deadline for their set-up: a peer that sent a
// valid request and then never completed the handshake would otherwise
// hold an endpoint, its descriptors and buffers, and a place among its
// listener's MaxConns, for ever. On tcp libfabric completes the handshake
// as soon as its answer is written, so this mostly guards verbs, whose
// connection manager waits for the peer's last message; on every provider
// it bounds what a set-up can cost.
//
// The deadline is an entry on the engine's clock (engine_clock.go): no
// goroutine or timer per connection.

// watchSetup gives the accepted link l until timeout to come up; a failure
// to is counted in stats. On the reactor.
func (l *link) watchSetup(timeout time.Duration, stats *acceptStats) {
	l.setupStats = stats
	l.eng.clock.at(&l.phase, time.Now().Add(timeout))
}

// forgetSetup stops watching l's set-up: it is up, or gone.
func (l *link) forgetSetup() { l.eng.clock.cancel(&l.phase) }

// onPhaseDeadline is the deadline of l's set-up or of its close: an
// accepted link not up in time fails, a closing one that lingered long
// enough is finished. It runs from the clock, outside any completion loop.
func (l *link) onPhaseDeadline(now time.Time) {
	switch l.life.State() {
	case lifecycle.Connecting:
		if l.setupStats == nil {
			return
		}
		l.setupStats.timedOut.Add(1)
		// The owner drops it (setupFailed), which counts it as failed.
		l.fail(fmt.Errorf("%w: the peer did not complete the handshake in time", os.ErrDeadlineExceeded))
	case lifecycle.Draining:
		if !l.lingerExpired(now) && l.life.State() == lifecycle.Draining {
			l.eng.clock.at(&l.phase, l.life.LingerUntil)
		}
	}
}

// released is an accepted link gone: it no longer counts against
// MaxConns. On the reactor.
func (a *acceptor) released() { a.stats.conns.Add(-1) }

// close stops taking requests; on the reactor. The manager stops reading
// the queue and hands it back (listenWatch.stop), and the reactor closes it
// behind the requests handed over before (sealed), which closes done. The
// acceptor holds an engine reference until then.
func (a *acceptor) close() {
	a.closed.Store(true)
	if a.rdm != nil {
		// The endpoint stays for the links on it, and closes after them.
		a.rdm.acceptor = nil
		a.rdm.release()
		a.rdm = nil
		close(a.done)
		return
	}
	a.eng.ref()
	// The manager outlives the engine's last reference, which is held.
	a.cm.r.SubmitFunc(a.watch.stop)
}

// sealed closes the passive endpoint and its queue once the manager has
// stopped reading it; on the reactor.
func (a *acceptor) sealed() {
	a.release()
	close(a.done)
	a.eng.release()
}

func (a *acceptor) release() {
	if a.q != nil {
		a.q.Close()
		a.q = nil
	}
	if a.fab != nil {
		a.fab.release()
		a.fab = nil
	}
}

// rejectFailedMarker rejects a peer whose connection the listener could
// not set up for another reason than its limits (an error of the fabric,
// counted in ListenerStats.Failed): the dialer is told it failed, not
// that the listener is full.
const rejectFailedMarker = "NTIO-REJECT-FAILED"

// errAcceptFailed is wrapped, with ErrRejected, by the dialer's error
// when the listener failed to set the connection up.
var errAcceptFailed = errors.New("the listener failed to set up the connection (see its Stats().Failed)")

// rejectDataFor is the reject that tells the peer why its accepted
// request could not be set up: a limit that may pass (registered memory,
// descriptors, memory), or a failure.
func rejectDataFor(err error) []byte {
	if errors.Is(err, ErrMemoryLimit) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOMEM) {
		return rejectLimitData
	}
	return []byte(rejectFailedMarker)
}

// acceptFailedError is the dialer's error for rejectFailedMarker.
func acceptFailedError() error { return fmt.Errorf("%w: %w", ErrRejected, errAcceptFailed) }
