package netio

import (
	"errors"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netio-go/netio/internal/osthread"
	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/ofi"
	"github.com/netio-go/netio/reactor"
)

// The connection manager reads the connection requests of the process's
// listeners and publishers on a thread of its own, so that nothing a peer
// does before it is admitted holds the reactor, which drives every
// established connection: libfabric's tcp provider accepts sockets and
// reads their requests, blocking, inside the calls that read a listener's
// event queue (ofi/requests.go). The manager checks each request's hello
// and key, rejects what fails, and hands the rest to the reactor through
// its task ring, where the owner's limits apply and the endpoint is made.
//
// Why two threads are safe with the domain opened FI_THREAD_DOMAIN
// (libfabric 1.17's source):
//
//   - Each passive endpoint has an event queue of its own, read only here;
//     endpoints keep the fabric's queue, read only on the reactor. The
//     manager touches fabric objects only (passive endpoints, their
//     queues), never an endpoint, completion queue or region.
//   - A request's fi_info and handle reach the reactor through the ring,
//     after the provider let go of them (tcpx_cm_recv_req takes the socket
//     out of the queue's wait set before it writes FI_CONNREQ). The
//     endpoint made from it is bound to the fabric's queue, so the
//     close_lock that fi_close(ep) takes (tcpx_ep_halt) is that queue's,
//     which only the reactor holds: the reactor never waits for this
//     thread.
//   - fi_reject runs on either thread, for different requests: it uses
//     the request's handle only (tcpx_pep_reject, vrb_msg_ep_reject).
//   - A passive endpoint is closed once both threads are done with it
//     (acceptor.close), and its queue is never read after: the provider
//     would finish a pending request through the freed endpoint
//     (tcpx_cm_recv_req reads handle->pep).
//   - On verbs a request's cm_id moves to the fabric's queue at fi_ep_bind
//     (rdma_migrate_id); an event for it read here in between is dropped
//     as not the passive endpoint's, and the link's set-up deadline ends
//     it.
type connManager struct {
	r   *reactor.Reactor // its own loop, on its own locked thread; it never spins
	eng *engine

	// Manager thread only.
	watches  []*listenWatch
	clock    clock // sweep and resume, on one timer (engine_clock.go)
	sweep    timed // the next incomplete request due
	resume   timed // the end of a pause
	paused   []*listenWatch
	pauseFor time.Duration // the current pause; doubles while it lasts (afterEvents)
}

// connManagerNice is the connection manager thread's nice value: a
// flood of connection requests then takes the CPU the data path leaves,
// not the reverse, on a machine with as few cores as this VM's two.
const connManagerNice = 10

func newConnManager(e *engine) (*connManager, error) {
	r, err := reactor.New(&reactor.Config{Spin: -1, OnInit: func(*reactor.Reactor) {
		// The loop's goroutine is locked to this thread for its life. On
		// Linux the nice value is the thread's; raising it needs no
		// privilege, and a failure only leaves it at the process's.
		unix.Setpriority(unix.PRIO_PROCESS, osthread.ID(), connManagerNice)
	}})
	if err != nil {
		return nil, err
	}
	m := &connManager{r: r, eng: e}
	m.sweep.Value, m.resume.Value = m.onSweep, m.resumeEvents
	if err := r.AddPoller(m); err != nil {
		r.Close()
		return nil, err
	}
	if cerr := r.Call(func() {
		// Made now: when it is needed, the process may be out of
		// descriptors.
		err = m.clock.open(r)
	}); cerr != nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return m, nil
}

// close stops the manager's thread; every watch has stopped before.
func (m *connManager) close() {
	m.r.Call(m.clock.close)
	m.r.Close()
}

// Poll has nothing to do: requests arrive through the queues' descriptors.
func (m *connManager) Poll() bool { return false }

// TryWait is fi_trywait on every watched queue: false, having read them,
// when one has events.
func (m *connManager) TryWait() bool {
	ok := true
	for _, w := range m.watches {
		if w.paused {
			continue
		}
		if can, err := w.q.TryWait(); err == nil && !can {
			ok = false
			w.readEvents()
			w.settle()
		}
	}
	return ok
}

// listenWatch is an acceptor's queue as the manager reads it.
type listenWatch struct {
	m       *connManager
	a       *acceptor
	q       *ofi.ListenQueue
	ev      ofi.Event
	paused  bool
	stopped bool
}

// start watches w's queue; on the manager's thread.
func (w *listenWatch) start() error {
	if err := w.m.r.Register(w.q.FD(), reactorIn, w); err != nil {
		return err
	}
	w.m.watches = append(w.m.watches, w)
	return nil
}

// HandleEvents reads the queue when its descriptor fires, then re-arms it.
func (w *listenWatch) HandleEvents(uint32) {
	got := false
	for i := 0; i < 8 && !w.stopped; i++ {
		got = w.readEvents() || got
		if ok, err := w.q.TryWait(); ok || err != nil {
			break
		}
	}
	if !w.stopped {
		w.settle()
		w.m.afterEvents(w, got)
	}
}

// settle brings w's pending requests and their counts up to date after
// a round of reads.
func (w *listenWatch) settle() {
	w.q.Settle()
	w.m.armSweep(w)
}

// readEvents reads and answers the queued requests, and reports whether
// there were any events.
func (w *listenWatch) readEvents() (got bool) {
	for !w.stopped {
		ok, err := w.q.Read(&w.ev)
		if err != nil || !ok {
			return got
		}
		got = true
		if w.ev.Kind == ofi.EventConnReq {
			w.request(&w.ev)
		}
	}
	return got
}

// request checks a connection request's hello and key, rejects it here if
// they fail, and hands it to the reactor otherwise.
func (w *listenWatch) request(ev *ofi.Event) {
	// The request's socket left the pending ones: counted so before the
	// peer hears anything.
	w.settle()
	a := w.a
	h, reject := a.screen(ev.PrivateData())
	if reject != nil {
		a.screenFailed(reject)
		w.q.Reject(ev.Info, reject)
		return
	}
	if a.eng.r.Submit(&connRequest{a: a, req: peerRequest{info: ev.Info}, h: h}) != nil {
		w.q.Reject(ev.Info, rejectData)
	}
}

// connRequest is a request that passed the manager's checks, for the
// reactor to answer.
type connRequest struct {
	a   *acceptor
	req peerRequest
	h   wire.Hello
}

func (c *connRequest) Run() {
	a := c.a
	if a.closed.Load() {
		// The queue is still open: the manager has not handed it back.
		a.q.Reject(c.req.info, rejectData)
		return
	}
	if reject := a.admit(&c.req, c.h); reject != nil {
		a.q.Reject(c.req.info, reject)
	}
}

// armSweep publishes w's counts of incomplete requests and arms the timer
// for the next one due: a request not complete within the acceptor's
// set-up timeout is dropped (the oldest beyond its MaxConns already are,
// as they come).
func (m *connManager) armSweep(w *listenWatch) {
	aborted, pending, next := w.q.Status()
	w.a.stats.incomplete.Store(aborted)
	w.a.stats.pendingRequests.Store(int64(pending))
	if !next.IsZero() && (!m.sweep.Queued() || next.Before(m.sweep.At())) {
		// Not sooner than in a millisecond: the provider's clock and ours
		// may round apart, and a sweep that finds nothing due must not
		// run again at once.
		if soonest := time.Now().Add(time.Millisecond); next.Before(soonest) {
			next = soonest
		}
		m.clock.at(&m.sweep, next)
	}
}

func (m *connManager) onSweep(time.Time) {
	for _, w := range m.watches {
		w.q.Sweep()
		m.armSweep(w)
	}
}

// stop stops reading w's queue and hands the queue back to the reactor,
// behind the requests handed to it before; on the manager's thread.
func (w *listenWatch) stop() {
	m := w.m
	w.stopped = true
	m.r.Unregister(w.q.FD())
	m.watches = slices.DeleteFunc(m.watches, func(x *listenWatch) bool { return x == w })
	m.unpause(w)
	// What was accepted and not read whole goes now; what was read is
	// turned away. The provider frees the aborted requests as it reads.
	w.q.AbortAll()
	for {
		ok, err := w.q.Read(&w.ev)
		if err != nil || !ok {
			break
		}
		if w.ev.Kind == ofi.EventConnReq {
			w.q.Reject(w.ev.Info, rejectData)
		}
	}
	// Behind every request handed over before; the reactor outlives the
	// engine reference the closing acceptor holds.
	w.a.eng.r.SubmitFunc(w.a.sealed)
}

// A process out of file descriptors cannot accept: libfabric's tcp
// provider calls accept(2) whenever a listener's event queue is read, gets
// EMFILE, and leaves the connection in the listening socket, which stays
// readable, so the queue's descriptor stays readable too and the thread
// reading it woke for it without end (1,100 idle sockets against a process
// limited to 1,024 descriptors held it at 87% CPU). libfabric does not
// report the failure, so the connection manager looks for it where it
// shows: a wake-up of a queue with nothing to read. Then it checks whether
// a descriptor can be had and, if not, stops watching the queue for a
// while, 5 ms doubling up to 1 s, the way Go's net/http accept loop backs
// off on EMFILE. Requests wait in the kernel's backlog meanwhile, and are
// taken once descriptors are free.

const (
	pauseFirst = 5 * time.Millisecond
	pauseMax   = time.Second
)

// afterEvents is called after each wake-up of w's queue; got is whether it
// had events. On the manager's thread.
func (m *connManager) afterEvents(w *listenWatch, got bool) {
	if got {
		m.pauseFor = 0
		return
	}
	if !outOfFiles(w.q.FD()) {
		m.pauseFor = 0 // a partial request, as happens
		return
	}
	m.pauseFor = min(max(2*m.pauseFor, pauseFirst), pauseMax)
	if !w.paused {
		w.paused = true
		m.paused = append(m.paused, w)
		m.r.Modify(w.q.FD(), 0)
		w.a.stats.acceptPauses.Add(1)
	}
	m.clock.at(&m.resume, time.Now().Add(m.pauseFor))
}

// resumeEvents watches the paused queues again. If descriptors are still
// short, the next empty wake-up pauses them for twice as long.
func (m *connManager) resumeEvents(time.Time) {
	for _, w := range m.paused {
		w.paused = false
		m.r.Modify(w.q.FD(), reactorIn)
	}
	clear(m.paused)
	m.paused = m.paused[:0]
}

// unpause forgets w, which stops.
func (m *connManager) unpause(w *listenWatch) {
	if i := slices.Index(m.paused, w); i >= 0 {
		m.paused = slices.Delete(m.paused, i, i+1)
	}
	w.paused = false
}

// outOfFiles reports whether the process can open no file descriptor, by
// duplicating open, one it has.
func outOfFiles(open int) bool {
	fd, err := unix.Dup(open)
	if err == nil {
		unix.Close(fd)
		return false
	}
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE)
}
