package netio

import (
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio/ofi"
	"github.com/netio-go/netio/reactor"
)

// engine is the process's reactor and the libfabric objects it owns. Every
// field not marked otherwise is touched only on the reactor thread.
//
// It drives links through the driven interface and paused writers through
// idleWatcher, and knows nothing else of connections: links use the
// engine, never the other way round.
type engine struct {
	r *reactor.Reactor

	fabrics    map[string]*fabricRes // by provider and fabric name
	targets    map[uint64]eqTarget   // endpoint tokens, for EQ events
	nextToken  uint64
	dirty      []busyLink    // links whose CQ was used since the last fi_trywait
	one        ofi.WaitList  // one link's queue, for pruneQuiet
	heardBeats bool          // Poll read links that had only received heartbeats
	idle       []idleWatcher // open pages watched for a pause of their writer
	idleTick   timed         // a sleeping reactor's next look for paused writers
	nextIdle   time.Time     // Poll looks for paused writers from then on
	refs       int           // guarded by engines.mu
	cqBuf      [64]ofi.Completion
	segBuf     []ofi.Segment

	clock clock // every deadline, on one timer (engine_clock.go)

	// cm reads the listeners' connection requests on a thread of its
	// own (connmgr.go); made with the first listener, guarded by
	// engines.mu until then.
	cm *connManager

	// wakesInFlight counts wake-ups sent to parked goroutines that have
	// not run yet. While there are any, nobody polls: Go's scheduler looks
	// at the netpoller only when a processor has nothing else to run, so a
	// goroutine that polls and yields would keep the woken one from
	// running. Any goroutine.
	wakesInFlight atomic.Int32
	// parks counts readers that parked, for the benchmarks' wakes per
	// message. Any goroutine.
	parks atomic.Uint64
}

// driven is a link as the engine drives it. Its deadlines (set-up,
// heartbeats, linger) are its own entries on the engine's clock.
type driven interface {
	// pollCQ reads the completion queue; it reports whether it did work.
	pollCQ() bool
	// urgent reports whether the link's traffic is latency-sensitive
	// (LowLatency), to be polled before bulk links and between them.
	urgent() bool
	// postDeferred posts what pollCQ left for after the urgent links'
	// turn, and reports whether there was any.
	postDeferred() bool
	// postWritten posts what the owner wrote and the link has not posted
	// yet, and reports whether there was any.
	postWritten() bool
	// queue is the completion queue to fi_trywait on (nil: none) and its fabric.
	queue() (*fabricRes, *ofi.CQ)
	// setDirty marks the link as in the busy list, returning the old mark.
	setDirty(bool) bool
	// onlyBeats reports whether all the link did since it joined the busy
	// list was to receive heartbeats: no answer follows those, so it
	// need not stay polled (pruneQuiet).
	onlyBeats() bool
	// settled reports whether the link has no send in flight, nothing
	// written that is not posted and no work left for postDeferred: only
	// such a link leaves the busy list before the reactor sleeps, since
	// nothing but the engine's rounds would do that work.
	settled() bool
}

// busyLink is a link in the engine's busy list.
type busyLink struct {
	d     driven
	quiet uint8 // rounds in a row it had nothing to do
}

// idleWatcher is an open page whose writer may pause.
type idleWatcher interface {
	// checkIdle seals the page if the writer paused, and reports whether
	// to stop watching and whether it sealed.
	checkIdle() (done, sealed bool)
	// startIdle marks the watcher as watched; false if it already was.
	startIdle() bool
	stopIdle()
}

// eqTarget receives the connection-management events of one endpoint.
type eqTarget interface {
	handleEvent(ev *ofi.Event)
}

// One engine serves the whole process, created on first use and stopped
// when the last Listener or Conn is released, so that an idle process
// keeps no thread, fd or memory of netio's.
var engines struct {
	mu       sync.Mutex
	e        *engine
	stopping chan struct{} // closed when the last engine released has stopped
}

// reactorSpin is how long the reactor polls after activity before it
// sleeps: $NETIO_SPIN (a duration; 0 turns polling off) or DefaultSpin.
// Waking a thread costs 40-140 µs on small VMs, so polling a little longer
// than a round trip keeps ping-pong traffic off the sleep path. The
// reactor yields the CPU on every polling round, so two processes polling
// on a 2-core machine share it (cmd/netio ping/pong there: 45 µs median
// round trip, 108 µs without polling, 419 µs polling without yielding).
// With GOMAXPROCS=1 it never polls: it would hold the only processor the
// goroutines it waits for could run on.
func reactorSpin() time.Duration {
	if v, err := time.ParseDuration(os.Getenv("NETIO_SPIN")); err == nil {
		if v <= 0 {
			return -1
		}
		return v
	}
	if runtime.GOMAXPROCS(0) < 2 {
		return -1
	}
	return DefaultSpin
}

// sparesCores reports whether a goroutine polling for its data can have a
// core of its own. Polling goroutines yield only to other goroutines, not
// to other processes: on two CPUs, two polling processes fight (ping/pong
// median 113-172 µs, against 45 µs without).
func sparesCores() bool {
	return runtime.GOMAXPROCS(0) >= 2 && runtime.NumCPU() >= 4
}

// engineIdlePoll is the reactor's IdlePoll (0: its default); tests make
// it long to show that a sleeping shm peer is woken by its doorbell.
var engineIdlePoll time.Duration

// acquireEngine returns the process's engine, starting one if there is
// none. A new one starts only once the last one has stopped: its shm
// endpoints are closed by then, so that this process's addresses a new
// endpoint inserts are either open or refused (ofi.AV.Insert), never
// closed later under it. Never on a reactor thread.
func acquireEngine() (*engine, error) {
	engines.mu.Lock()
	defer engines.mu.Unlock()
	for engines.e == nil && engines.stopping != nil {
		stopping := engines.stopping
		engines.mu.Unlock()
		<-stopping
		engines.mu.Lock()
	}
	if engines.e == nil {
		e := &engine{fabrics: map[string]*fabricRes{}, targets: map[uint64]eqTarget{}}
		e.idleTick.Value = e.onIdleTick
		r, err := reactor.New(&reactor.Config{Spin: reactorSpin(), IdlePoll: engineIdlePoll})
		if err != nil {
			return nil, err
		}
		e.r = r
		if err := r.AddPoller(e); err != nil {
			r.Close()
			return nil, err
		}
		if err := r.Call(func() {
			// All made now: when they are needed, the process may be out
			// of descriptors.
			err = e.clock.open(r)
		}); err != nil {
			r.Close()
			return nil, err
		}
		engines.e = e
	}
	engines.e.refs++
	return engines.e, nil
}

// connManager returns the engine's connection manager, starting it on
// first use: a process that only dials needs none. Any goroutine but the
// reactor.
func (e *engine) connManager() (*connManager, error) {
	engines.mu.Lock()
	defer engines.mu.Unlock()
	if e.cm == nil {
		cm, err := newConnManager(e)
		if err != nil {
			return nil, err
		}
		e.cm = cm
	}
	return e.cm, nil
}

// ref adds a reference to an engine already held by the caller.
func (e *engine) ref() {
	engines.mu.Lock()
	e.refs++
	engines.mu.Unlock()
}

// release drops one reference; the last one stops the reactor. It may be
// called on the reactor thread, so the stop happens on another goroutine.
func (e *engine) release() {
	engines.mu.Lock()
	defer engines.mu.Unlock()
	e.refs--
	if e.refs < 0 {
		panic("netio: engine released more often than acquired")
	}
	if e.refs > 0 {
		return
	}
	engines.e = nil
	stopped := make(chan struct{})
	engines.stopping = stopped
	go func() {
		defer func() {
			engines.mu.Lock()
			if engines.stopping == stopped {
				engines.stopping = nil
			}
			engines.mu.Unlock()
			close(stopped)
		}()
		e.r.Call(func() {
			e.clock.close()
			for _, f := range e.fabrics {
				f.close()
			}
			closeRDMEndpoints(e)
		})
		e.r.Close()
		if e.cm != nil {
			// Every listener has handed its queue back (acceptor.sealed)
			// before it let go of the engine.
			e.cm.close()
		}
	}()
}

func (e *engine) newToken(t eqTarget) uint64 {
	e.nextToken++
	e.targets[e.nextToken] = t
	return e.nextToken
}

// fabricRes is an opened fabric with its event queue and domains,
// reference-counted by the listeners and connections that use it.
type fabricRes struct {
	e       *engine
	key     string
	fabric  *ofi.Fabric
	eq      *ofi.EQ
	domains map[string]*domainRes
	refs    int
	closed  bool
	waits   ofi.WaitList
	eqWait  ofi.WaitList // just the EQ
	ev      ofi.Event
}

type domainRes struct {
	f      *fabricRes
	name   string
	domain *ofi.Domain
	refs   int
}

// fabricFor returns the opened fabric for info, opening it on first use.
func (e *engine) fabricFor(info *ofi.Info) (*fabricRes, error) {
	key := info.Provider() + "\x00" + info.FabricName()
	if f := e.fabrics[key]; f != nil {
		f.refs++
		return f, nil
	}
	fab, err := ofi.OpenFabric(info)
	if err != nil {
		return nil, err
	}
	eq, err := fab.OpenEQ(256)
	if err != nil {
		fab.Close()
		return nil, err
	}
	if info.Provider() == "tcp" {
		// Without it (no /proc), a hostile server can keep the reactor
		// reading this queue until a dial times out (EQ.Settle).
		eq.WatchSockets()
	}
	f := &fabricRes{e: e, key: key, fabric: fab, eq: eq, domains: map[string]*domainRes{}, refs: 1}
	f.eqWait.Add(eq)
	if err := e.r.Register(eq.FD(), reactorIn, (*eqHandler)(f)); err != nil {
		eq.Close()
		fab.Close()
		return nil, err
	}
	e.fabrics[key] = f
	return f, nil
}

func (f *fabricRes) release() {
	if f.refs--; f.refs > 0 {
		return
	}
	delete(f.e.fabrics, f.key)
	f.close()
}

func (f *fabricRes) close() {
	f.closed = true
	f.e.r.Unregister(f.eq.FD())
	for _, d := range f.domains {
		d.domain.Close()
	}
	f.eq.Close()
	f.fabric.Close()
}

// domainFor returns the opened domain for info within f.
func (f *fabricRes) domainFor(info *ofi.Info) (*domainRes, error) {
	name := info.DomainName()
	if d := f.domains[name]; d != nil {
		d.refs++
		return d, nil
	}
	dom, err := f.fabric.OpenDomain(info)
	if err != nil {
		return nil, err
	}
	d := &domainRes{f: f, name: name, domain: dom, refs: 1}
	f.domains[name] = d
	return d, nil
}

func (d *domainRes) release() {
	if d.refs--; d.refs > 0 {
		return
	}
	delete(d.f.domains, d.name)
	d.domain.Close()
}

// eqHandler reads a fabric's event queue when its fd fires: the events of
// the fabric's endpoints. Listeners' requests come on queues of their own,
// read by the connection manager (connmgr.go).
type eqHandler fabricRes

const reactorIn = 0x1 // EPOLLIN

// HandleEvents drains the queue, then re-arms it: the wait fd stays readable
// until fi_trywait succeeds, and a readable fd keeps the reactor awake.
func (h *eqHandler) HandleEvents(uint32) {
	f := (*fabricRes)(h)
	got := false
	for i := 0; i < 8 && !f.closed; i++ {
		got = f.readEvents() || got
		if f.closed || f.eq.Pending() {
			return
		}
		if ok, err := f.fabric.TryWait(&f.eqWait); ok || err != nil {
			break
		}
	}
	if !got && !f.closed {
		f.eq.Settle() // a wake-up with nothing to read
	}
}

// readEvents reads and dispatches the queued events and reports whether
// there were any.
func (f *fabricRes) readEvents() (got bool) {
	// The last connection of a fabric may end inside this loop and
	// close the fabric with it.
	for !f.closed {
		ok, err := f.eq.Read(&f.ev)
		if err != nil || !ok {
			return got
		}
		got = true
		if f.ev.Kind == ofi.EventOther {
			continue
		}
		t := f.e.targets[f.ev.Context]
		if t == nil {
			continue
		}
		t.handleEvent(&f.ev)
	}
	return got
}

// Poll drives the completion queues used since the last sleep; libfabric's
// tcp provider makes progress only inside such calls. It also looks for
// writers that paused with a page open. Heartbeats received are background
// work (reactor.Reactor.Background), not work it reports.
func (e *engine) Poll() bool {
	busy := false
	e.heardBeats = false
	if len(e.idle) > 0 {
		// Not on every round: each look is a CAS on the writer's send
		// gate, and a writer in full flow would pay for the cache line
		// every time.
		if now := time.Now(); now.After(e.nextIdle) {
			e.nextIdle = now.Add(idleLook)
			busy = e.checkIdle()
		}
	}
	// Latency-sensitive links first, and again after every bulk link
	// that moved data: a bulk link's turn is a slice of bounded size
	// (slice.go), so a small message waits for at most one.
	busy = e.pollUrgent() || busy
	for i := 0; i < len(e.dirty); i++ {
		d := e.dirty[i].d
		if d.urgent() {
			continue
		}
		worked := d.pollCQ()
		if worked {
			busy = e.foreground(d) || busy
			e.pollUrgent()
		}
		if d.postDeferred() {
			worked, busy = true, true
			e.pollUrgent()
		}
		if worked {
			e.worked(i, d)
		}
	}
	e.pruneQuiet()
	if e.heardBeats {
		e.r.Background()
	}
	return busy
}

// foreground reports whether what d's pollCQ read is work to report, and
// notes background work instead if all d did since it joined the busy list
// was receive heartbeats.
func (e *engine) foreground(d driven) bool {
	if d.onlyBeats() {
		e.heardBeats = true
		return false
	}
	return true
}

// worked restarts the quiet count of d, which was at i in the busy list
// when its turn began; a link that ended in the turn may have moved it.
func (e *engine) worked(i int, d driven) {
	if i < len(e.dirty) && e.dirty[i].d == d {
		e.dirty[i].quiet = 0
		return
	}
	for j := range e.dirty {
		if e.dirty[j].d == d {
			e.dirty[j].quiet = 0
			return
		}
	}
}

// quietRounds is how many rounds in a row a busy link must find nothing
// to do before pruneQuiet arms its queue alone: more than a round trip's
// wait on a busy link, so that such a link stays polled.
const quietRounds = 64

// beatQuietRounds is quietRounds for a link that only received
// heartbeats: beside a thousand idle connections a few join the list
// every round trip, and each round reads every listed queue.
const beatQuietRounds = 2

// pruneQuiet takes out of the busy list the settled links quiet for
// quietRounds whose queue fi_trywait alone finds empty (and arms): their
// descriptor brings them back. Without it the list holds every link that
// was used since the reactor last slept, and a reactor kept awake (by one
// busy connection, or by hundreds of idle ones taking turns to beat) reads
// every one of them on every round.
func (e *engine) pruneQuiet() {
	kept := 0
	for _, b := range e.dirty {
		if b.quiet < quietRounds && (b.quiet < beatQuietRounds || !b.d.onlyBeats()) {
			b.quiet++
		} else if f, cq := b.d.queue(); cq != nil && b.d.settled() {
			e.one.Reset()
			e.one.Add(cq)
			if ok, err := f.fabric.TryWait(&e.one); err == nil && ok {
				b.d.setDirty(false)
				continue
			}
			b.quiet = 0
		}
		e.dirty[kept] = b
		kept++
	}
	clear(e.dirty[kept:])
	e.dirty = e.dirty[:kept]
}

// pollUrgent polls the busy links whose traffic is latency-sensitive and
// reports whether they did work other than receive heartbeats (foreground).
func (e *engine) pollUrgent() bool {
	busy := false
	for i := 0; i < len(e.dirty); i++ {
		d := e.dirty[i].d
		if !d.urgent() {
			continue
		}
		worked := d.pollCQ()
		if worked {
			busy = e.foreground(d) || busy
		}
		// What the owner wrote goes now, not when its kick comes up
		// in the task ring, behind the bulk links' turns.
		if d.postWritten() {
			worked, busy = true, true
		}
		if worked {
			e.worked(i, d)
		}
	}
	return busy
}

// TryWait is fi_trywait over every fabric's event queue and the completion
// queues used since the last sleep. Queues untouched since then were
// already armed by an earlier trywait.
func (e *engine) TryWait() bool {
	if e.checkIdle() {
		return false // a page went out: its completion comes next
	}
	if len(e.idle) > 0 && !e.idleTick.Queued() {
		// A writer is still filling a page: look again soon, asleep.
		e.clock.at(&e.idleTick, time.Now().Add(idleTick))
	}
	for _, f := range e.fabrics {
		f.waits.Reset()
		f.waits.Add(f.eq)
	}
	for _, b := range e.dirty {
		if f, cq := b.d.queue(); cq != nil {
			f.waits.Add(cq)
		}
	}
	ok := true
	for _, f := range e.fabrics {
		if f.eq.Pending() {
			ok = false
			f.readEvents()
			continue
		}
		if can, err := f.fabric.TryWait(&f.waits); err == nil && !can {
			ok = false
			f.readEvents()
		}
	}
	if ok {
		for _, b := range e.dirty {
			b.d.setDirty(false)
		}
		clear(e.dirty)
		e.dirty = e.dirty[:0]
	}
	return ok
}

// idleTick is how often a sleeping reactor looks for paused writers; while
// it polls (Config.Spin after activity) it looks every idleLook.
const idleTick = 50 * time.Microsecond

// idleLook is how often a polling reactor looks for paused writers.
const idleLook = 5 * time.Microsecond

// watchIdle starts watching w's open page for a pause of its writer.
func (e *engine) watchIdle(w idleWatcher) {
	if w.startIdle() {
		e.idle = append(e.idle, w)
	}
}

// checkIdle seals the pages of writers that paused and reports whether it
// sealed any.
func (e *engine) checkIdle() bool {
	sealed := false
	for i := 0; i < len(e.idle); {
		w := e.idle[i]
		done, s := w.checkIdle()
		if done {
			w.stopIdle()
			last := len(e.idle) - 1
			e.idle[i], e.idle[last] = e.idle[last], nil
			e.idle = e.idle[:last]
		} else {
			i++
		}
		sealed = sealed || s
	}
	return sealed
}

func (e *engine) onIdleTick(time.Time) { e.checkIdle() }

// forgetIdle stops watching w.
func (e *engine) forgetIdle(w idleWatcher) {
	for i, x := range e.idle {
		if x == w {
			e.idle = append(e.idle[:i], e.idle[i+1:]...)
			w.stopIdle()
			return
		}
	}
}

// markDirty puts d in the busy list: its queue is read on every round
// until fi_trywait says it is quiet.
func (e *engine) markDirty(d driven) {
	if !d.setDirty(true) {
		e.dirty = append(e.dirty, busyLink{d: d})
	}
}

// forget drops d from the busy list. It looks from the end, where a link
// listed in the current round is.
func (e *engine) forget(d driven) {
	if d.setDirty(false) {
		for i := len(e.dirty) - 1; i >= 0; i-- {
			if e.dirty[i].d == d {
				e.dirty = slices.Delete(e.dirty, i, i+1)
				break
			}
		}
	}
}
