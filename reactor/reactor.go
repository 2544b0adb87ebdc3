// Package reactor is netio's event loop: one goroutine, locked to its OS
// thread, that owns every libfabric object and runs every callback.
//
// It follows the event loop of CERN's NetIO-next: an initialisation hook,
// file descriptors watched with epoll (level-triggered), timers on timerfd
// and signals on eventfd in semaphore mode. On top of that it adds what a Go
// program needs to hand work to that thread cheaply:
//
//   - Submit and Call push a Task onto a lock-free multi-producer ring. A
//     pointer Task costs no allocation.
//   - After the last activity the loop keeps polling for Config.Spin before
//     it sleeps in epoll_wait. Producers write the doorbell eventfd only when
//     the loop is asleep or about to sleep, so a busy reactor costs them no
//     system call, and a burst of submits to a sleeping reactor costs one.
//     Waking a sleeping thread costs tens of microseconds; that is what the
//     spinning and the coalesced doorbell avoid. With one P (GOMAXPROCS=1)
//     the loop does not spin and sleeps in Go's network poller instead, so
//     that the P it would hold in epoll_wait runs other goroutines.
//   - Pollers are sources that progress only when called (libfabric's
//     manual progress): they are polled on every iteration and asked
//     (TryWait, libfabric's fi_trywait) whether sleeping is safe.
//   - Work that predicts no more (a heartbeat sent or received, a timer
//     with nothing to follow) starts no spin when it wakes the loop
//     (Background), so that a process with many idle connections does not
//     poll for a spin after every beat of theirs.
//
// Callbacks (OnInit, Task.Run, Handler.HandleEvents, Poller methods, timer
// and signal callbacks, functions passed to Call) run on the reactor thread,
// one at a time. They must not block: a callback that waits stops every
// other event source, and a callback that waits for another callback
// deadlocks. They must not panic either: a panic on the reactor is not
// recovered and ends the program.
package reactor

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// ErrClosed is returned by operations on a reactor that has been stopped or
// closed, and by operations on a closed Timer or Signal. It is net.ErrClosed,
// so errors.Is(err, net.ErrClosed) holds.
var ErrClosed = net.ErrClosed

const (
	// DefaultSpin is how long, by default, the loop keeps polling after the
	// last activity before it sleeps. It is a little more than one round
	// trip plus a thread wake-up on a small VM (netio's ping/pong between
	// two processes on 2 cores: 45 µs median with it, 108 µs without), so
	// a steady stream of work never pays for wake-ups, while an idle
	// reactor stops burning its CPU quickly. netio.DefaultSpin is this.
	DefaultSpin = 100 * time.Microsecond

	// DefaultQueueSize is the default capacity of the command ring.
	DefaultQueueSize = 4096
)

// maxEvents is the size of the epoll_wait buffer: at most this many ready
// descriptors are handled per iteration (the kernel rotates the rest).
const maxEvents = 128

// maxQueueSize bounds Config.QueueSize (the ring is allocated up front).
const maxQueueSize = 1 << 24

// bellSlot is the epoll data of the doorbell; handler slots are >= 0.
const bellSlot = -1

// one is the 8-byte value 1 that eventfd writes take, in host byte order.
var one = func() (b [8]byte) {
	binary.NativeEndian.PutUint64(b[:], 1)
	return b
}()

// Config tunes a Reactor. The zero value gives the defaults.
type Config struct {
	// Spin is how long the loop keeps polling (epoll_wait with timeout 0,
	// plus every Poller) after the last activity before it sleeps in
	// epoll_wait(-1). Spinning trades one CPU for latency: work that arrives
	// while the loop spins costs neither the producer a doorbell write nor
	// the reactor a wake-up. A goroutine blocked in Call also polls for its
	// result for up to Spin before it parks. Zero means DefaultSpin; a
	// negative value means never spin: the loop tries to sleep as soon as an
	// iteration finds nothing to do, and Call parks at once. Spinning needs a
	// second P: with GOMAXPROCS=1 the spinning thread would hold the only P
	// and starve every other goroutine, so zero then means no spinning
	// (GOMAXPROCS is read once, by New); a positive value is always obeyed.
	Spin time.Duration

	// QueueSize is the capacity of the lock-free command ring, rounded up to
	// a power of two (at least 2). When the ring is full, Submit falls back
	// to a mutex-protected overflow list, so the size bounds memory and the
	// lock-free fast path, not the number of pending tasks. Zero means
	// DefaultQueueSize; a negative value is an error.
	QueueSize int

	// IdlePoll is the longest the loop sleeps while a BlindPoller has
	// sources no descriptor reports (blind.go): the most an idle blind
	// source's first event waits, and the period of an idle loop's
	// wake-ups. Zero means DefaultIdlePoll; a negative value is an error.
	IdlePoll time.Duration

	// OnInit, if not nil, runs once on the reactor thread before any other
	// event or task. It receives the reactor because New may not have
	// returned yet when it runs. Nil means no initialisation hook.
	OnInit func(r *Reactor)
}

// Task is work handed to the reactor. Submitting a pointer that implements
// Task costs no allocation, so hot paths keep a preallocated command object
// per connection or per operation instead of building a closure.
type Task interface {
	// Run executes the task on the reactor thread. It must not block.
	Run()
}

// Handler receives readiness of a registered file descriptor.
type Handler interface {
	// HandleEvents is called on the reactor thread with the ready events
	// (unix.EPOLLIN, unix.EPOLLOUT, unix.EPOLLERR, ...). Registration is
	// level-triggered: it is called again on every iteration while the
	// condition persists.
	HandleEvents(events uint32)
}

// Poller is an event source that must be driven by calls, not only by file
// descriptor readiness: libfabric progress is manual, so its completion and
// event queues are read on every iteration. A Poller must be comparable
// (typically a pointer) so that RemovePoller can find it.
type Poller interface {
	// Poll makes progress without blocking and reports whether it did any
	// work (background work, like a heartbeat, may be told with
	// Reactor.Background instead). It is called on every loop iteration
	// while the loop is busy or spinning, and after every wake from
	// epoll_wait.
	Poll() bool

	// TryWait is called right before the reactor sleeps in epoll_wait(-1)
	// and reports whether sleeping is safe: whether every event the poller
	// cares about will make one of its registered descriptors readable
	// (libfabric's fi_trywait). If any poller reports false the reactor
	// does not sleep and goes round again.
	TryWait() bool
}

// Stats are counters of the reactor's work since New, each read atomically
// (the set is not one consistent snapshot).
type Stats struct {
	// Tasks is the number of tasks run (Submit, SubmitFunc and Call from
	// other goroutines).
	Tasks uint64
	// Overflows is the number of tasks that went to the overflow list
	// because the ring was full (or the overflow list was not empty).
	Overflows uint64
	// Spins is the number of idle loop iterations spent spinning, waiting
	// for work before sleeping.
	Spins uint64
	// Sleeps is the number of times the loop went to sleep in
	// epoll_wait(-1).
	Sleeps uint64
	// Wakeups is the number of returns from epoll_wait(-1).
	Wakeups uint64
	// TimedSleeps is the number of those sleeps bounded by the timer of
	// a blind source (BlindPoller): an idle loop without one sleeps
	// until a descriptor is ready, and this stops growing.
	TimedSleeps uint64
	// DoorbellWrites is the number of doorbell eventfd writes by producers
	// (and Stop): at most one per sleep, however many tasks arrived.
	DoorbellWrites uint64
}

// Reactor is an event loop running on its own locked OS thread. Its methods
// are safe for concurrent use unless documented otherwise.
type Reactor struct {
	// sleeping is 1 while the loop is asleep in epoll_wait(-1) or about to
	// be. Producers read it after every push: keep it on its own line.
	_        [cacheLine]byte
	sleeping atomic.Uint32
	stopping atomic.Bool
	inWait   atomic.Bool // the loop is inside epoll_wait(-1); read by polling callers
	_        [cacheLine - 8]byte

	ring ring

	// Overflow list, used when the ring is full. ovLen mirrors
	// len(ovList) so that the fast paths need no lock.
	ovMu    sync.Mutex
	ovList  []Task
	ovLen   atomic.Int64
	ovSpare []Task // consumer only: the other buffer

	// The doorbell; bellMu guards it against Close (a producer may
	// ring it at any time).
	bellMu     sync.RWMutex
	bellfd     int
	bellClosed bool

	epfd        int
	park        *parkedWait // nil unless GOMAXPROCS was 1 at New
	spin        time.Duration
	callPoll    time.Duration // how long a Call may poll; 0: never
	maxPollers  int32         // how many Calls may poll at once
	callPollers atomic.Int32  // Calls polling now
	batch       int
	onInit      func(*Reactor)
	tid         atomic.Int32 // thread of the loop; 0 once it has exited
	done        chan struct{}
	closeOnExit atomic.Bool
	cleanupOnce sync.Once

	// Reactor-thread state.
	events     []epollEvent
	slots      []slot
	free       []int32
	fdSlot     map[int]int32
	pollers    []Poller
	blind      blindSleep
	scratch    [8]byte
	epoch      time.Time
	now        time.Duration // the round's clock, since epoch (clock.go)
	round      uint64        // the rounds counted so far
	background bool          // Background was called by the running handler or poller
	bgRound    bool          // some handler or poller of this round did background work

	// Timers and signals not closed yet, closed by Close.
	ownMu  sync.Mutex
	owned  map[*fdObj]struct{}
	closed bool

	stats struct {
		tasks, overflows, spins, sleeps, wakeups, timed, doorbells atomic.Uint64
	}
}

// slot is a registered descriptor. gen changes when the slot is freed, so
// that an event collected before Unregister is not delivered to a later
// registration that reuses the slot.
type slot struct {
	h   Handler
	fd  int
	gen int32
}

// New creates a reactor and starts its loop on a new goroutine locked to its
// OS thread. cfg may be nil. It returns once the loop is running; OnInit may
// still be running or done.
func New(cfg *Config) (*Reactor, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	switch {
	case c.Spin == 0 && runtime.GOMAXPROCS(0) < 2:
		c.Spin = 0
	case c.Spin == 0:
		c.Spin = DefaultSpin
	case c.Spin < 0:
		c.Spin = 0
	}
	switch {
	case c.QueueSize == 0:
		c.QueueSize = DefaultQueueSize
	case c.QueueSize < 0 || c.QueueSize > maxQueueSize:
		return nil, errors.New("reactor: QueueSize out of range")
	}
	switch {
	case c.IdlePoll == 0:
		c.IdlePoll = DefaultIdlePoll
	case c.IdlePoll < 0:
		return nil, errors.New("reactor: negative IdlePoll")
	}
	size := 2
	for size < c.QueueSize {
		size <<= 1
	}

	epfd, err := epollCreate()
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	bell, err := newEventfd(false)
	if err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	ev := epollEvent{Events: epollIn, Fd: bellSlot}
	if err := epollCtl(epfd, epollCtlAdd, bell, &ev); err != nil {
		unix.Close(bell)
		unix.Close(epfd)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}

	r := &Reactor{
		bellfd: bell,
		epfd:   epfd,
		spin:   c.Spin,
		batch:  size,
		// Polling callers may use every P but one, which stays free
		// for the reactor when it wakes up (GOMAXPROCS=1: no polling).
		callPoll:   min(c.Spin, maxCallPoll),
		maxPollers: int32(runtime.GOMAXPROCS(0) - 1),
		onInit:     c.OnInit,
		done:       make(chan struct{}),
		events:     make([]epollEvent, maxEvents),
		fdSlot:     make(map[int]int32),
		owned:      make(map[*fdObj]struct{}),
		epoch:      time.Now(),
		blind:      blindSleep{fd: -1, limit: c.IdlePoll},
	}
	if runtime.GOMAXPROCS(0) < 2 {
		if r.park, err = newParkedWait(r); err != nil {
			unix.Close(bell)
			unix.Close(epfd)
			return nil, err
		}
	}
	r.ring.init(size)
	started := make(chan struct{})
	go r.loop(started)
	<-started
	return r, nil
}

// loop is the reactor goroutine.
func (r *Reactor) loop(started chan<- struct{}) {
	runtime.LockOSThread()
	// Never unlocked: the thread ends with the goroutine.
	r.tid.Store(gettid())
	close(started)
	defer r.exit()

	if r.onInit != nil {
		r.onInit(r)
	}

	idleSince := time.Duration(-1) // since r.epoch; -1: busy
	// bgWake: the last wake-up found only background work, and nothing
	// else came since. Background work then starts no spin; during a spin
	// that other work started it counts as work, as it took part of it.
	bgWake := false
	for !r.stopping.Load() {
		r.bgRound = false
		active := r.runTasks()
		if n := r.wait(0); n > 0 && r.dispatch(n) {
			active = true
		}
		r.tick()
		if r.poll() {
			active = true
		}
		if active {
			bgWake = false
		} else if r.bgRound && !bgWake {
			active = true
		}
		if active {
			idleSince = -1
			r.resetBlind()
			continue
		}
		if r.spin > 0 {
			// The round's clock was read before its poll, so a loop
			// that sleeps has polled once more after a full spin
			// (clock.go: what a peer's doorbell relies on).
			if idleSince < 0 {
				idleSince = r.now
			}
			if r.now-idleSince < r.spin {
				r.stats.spins.Add(1)
				// Let another thread have the core if one is waiting
				// (a peer process on a small machine); costs a system
				// call, about as much as the epoll_wait(0) above.
				schedYield()
				continue
			}
		}

		// Sleep protocol. Producers push then load sleeping; we store
		// sleeping then look for work. Both are sequentially consistent,
		// so either we see their task or they see sleeping == 1 and ring
		// the doorbell.
		r.sleeping.Store(1)
		if r.pending() || !r.tryWait() {
			r.sleeping.Store(0)
			continue
		}
		r.stats.sleeps.Add(1)
		timed := r.armBlind()
		if timed {
			r.stats.timed.Add(1)
		}
		r.inWait.Store(true)
		var n int
		if r.park != nil {
			n = r.park.wait()
		} else {
			n = r.wait(-1)
		}
		r.inWait.Store(false)
		r.sleeping.Store(0)
		r.stats.wakeups.Add(1)
		fg := r.dispatch(n)
		r.tick()
		worked := r.poll()
		if timed {
			r.afterBlind(worked || r.pending())
			if !worked {
				// Woken by the timer alone: sleep again at once
				// (with a longer timer), without a spin.
				continue
			}
		}
		if !fg && !worked {
			// Woken for background work only: sleep again as soon
			// as a round finds nothing, without a spin (idleSince
			// is still the start of the spin before this sleep).
			bgWake = true
			continue
		}
		bgWake = false
		idleSince = -1
	}
}

// exit runs when the loop goroutine ends.
func (r *Reactor) exit() {
	r.sleeping.Store(0)
	r.tid.Store(0)
	if r.closeOnExit.Load() {
		r.cleanupOnce.Do(r.cleanup)
	}
	close(r.done)
}

// pending reports whether a task or a stop request is waiting.
func (r *Reactor) pending() bool {
	return r.stopping.Load() || r.ring.ready() || r.ovLen.Load() != 0
}

// tryWait asks every poller whether sleeping is safe.
func (r *Reactor) tryWait() bool {
	for i := 0; i < len(r.pollers); i++ {
		if !r.pollers[i].TryWait() {
			return false
		}
	}
	return true
}

// poll calls every poller once and reports whether any did work. The slice
// is re-read on every step so that a poller removed by a callback is not
// called again.
func (r *Reactor) poll() bool {
	did := false
	for i := 0; i < len(r.pollers); i++ {
		r.background = false
		if r.pollers[i].Poll() {
			did = true
		}
		if r.background {
			r.bgRound = true
		}
	}
	return did
}

// wait is epoll_wait into r.events; EINTR counts as no events.
func (r *Reactor) wait(msec int) int {
	n, err := epollWait(r.epfd, r.events, msec)
	if err != nil {
		if err == unix.EINTR {
			return 0
		}
		panic(os.NewSyscallError("epoll_wait", err))
	}
	return n
}

// dispatch delivers the first n collected events. A slot is re-read for
// every event, since a handler may unregister or register descriptors. It
// reports whether any was foreground work: the doorbell (tasks follow), the
// blind timer, or a handler that did not call Background.
func (r *Reactor) dispatch(n int) (fg bool) {
	for i := 0; i < n; i++ {
		ev := &r.events[i]
		s := ev.Fd
		if s == bellSlot {
			unix.Read(r.bellfd, r.scratch[:]) // reset; EAGAIN is fine
			fg = true
			continue
		}
		if s == idleSlot {
			r.blindFired()
			fg = true
			continue
		}
		if int(s) >= len(r.slots) {
			continue
		}
		sl := &r.slots[s]
		if sl.h == nil || sl.gen != ev.Pad {
			continue // unregistered during this batch
		}
		r.background = false
		sl.h.HandleEvents(ev.Events)
		if r.background {
			r.bgRound = true
		} else {
			fg = true
		}
	}
	return fg
}

// Background tells the loop that the handler or poller now running did
// background work: work that predicts no more soon (a heartbeat sent or
// received, a timer with nothing to follow). A handler that calls it did
// only that; a poller reports other work by returning true. A loop woken
// from its sleep for background work alone sleeps again as soon as a round
// finds nothing, without a spin. While a spin that other work started
// goes on, background work counts as work: it may have taken part of the
// spin. Reactor thread only, from Handler.HandleEvents
// (a timer's or signal's callback included) or Poller.Poll.
func (r *Reactor) Background() { r.background = true }

// runTasks runs at most one batch from the ring, then the overflow list if
// it is not empty, and reports whether any task ran.
func (r *Reactor) runTasks() bool {
	n := 0
	for n < r.batch {
		t, ok := r.ring.pop()
		if !ok {
			break
		}
		t.Run()
		n++
	}
	if r.ovLen.Load() != 0 {
		n += r.runOverflow()
	}
	if n == 0 {
		return false
	}
	r.stats.tasks.Add(uint64(n))
	return true
}

// runOverflow runs the overflow list. To keep each producer's order, every
// task a producer pushed to the ring before it appended to the list must run
// first: those were claimed before the list was taken, so the ring is drained
// up to the tail seen under the lock (waiting for producers still between
// their claim and their publish). While the list is not empty producers
// append to it instead of the ring, so a producer whose next task goes to
// the ring saw it empty, after the snapshot.
func (r *Reactor) runOverflow() int {
	r.ovMu.Lock()
	list := r.ovList
	r.ovList = r.ovSpare[:0]
	until := r.ring.tail.Load()
	r.ovLen.Store(0)
	r.ovMu.Unlock()

	n := 0
	for r.ring.head < until {
		t, ok := r.ring.pop()
		if !ok {
			runtime.Gosched() // a producer is mid-push
			continue
		}
		t.Run()
		n++
	}
	for i, t := range list {
		list[i] = nil
		t.Run()
		n++
	}
	r.ovSpare = list[:0]
	return n
}

// Submit hands t to the reactor, which runs it once, after the tasks this
// goroutine submitted before. It never blocks and is safe from any
// goroutine, including the reactor itself; pushing a pointer costs no
// allocation. It returns ErrClosed once Stop or Close was called. A task
// submitted concurrently with Stop may be dropped: tasks still queued when
// the loop ends never run.
func (r *Reactor) Submit(t Task) error {
	if t == nil {
		return errors.New("reactor: nil Task")
	}
	if r.stopping.Load() {
		return ErrClosed
	}
	if r.ovLen.Load() != 0 || !r.ring.push(t) {
		r.ovMu.Lock()
		r.ovList = append(r.ovList, t)
		r.ovLen.Store(int64(len(r.ovList)))
		r.ovMu.Unlock()
		r.stats.overflows.Add(1)
	}
	r.wake()
	return nil
}

// wake rings the doorbell if the loop is asleep or about to be, at most once
// per sleep: the Swap makes exactly one producer of a burst ring it.
func (r *Reactor) wake() {
	if r.sleeping.Load() != 0 && r.sleeping.Swap(0) != 0 {
		r.bellMu.RLock()
		if !r.bellClosed {
			unix.Write(r.bellfd, one[:])
			r.stats.doorbells.Add(1)
		}
		r.bellMu.RUnlock()
	}
}

// funcTask adapts a func to Task.
type funcTask func()

func (f funcTask) Run() { f() }

// SubmitFunc is Submit for a function. Converting f to a Task may allocate;
// hot paths should Submit a preallocated pointer instead.
func (r *Reactor) SubmitFunc(f func()) error {
	if f == nil {
		return errors.New("reactor: nil func")
	}
	return r.Submit(funcTask(f))
}

// callTask is a Call in flight; pooled, with a reusable 1-buffered channel.
// state tells the reactor whether the waiter still polls (no channel send,
// hence no goroutine wake-up needed) or sleeps on done.
type callTask struct {
	f     func()
	state atomic.Uint32 // callPending, callDone or callParked
	done  chan struct{}
}

const (
	callPending = iota // f not run yet; the waiter polls state
	callDone           // f has returned
	callParked         // the waiter blocks on done
)

func (c *callTask) Run() {
	c.f()
	if c.state.Swap(callDone) == callParked {
		c.done <- struct{}{}
	}
}

var callPool = sync.Pool{New: func() any { return &callTask{done: make(chan struct{}, 1)} }}

// Call runs f on the reactor and waits for it to return. Called on the
// reactor thread (from a callback), it runs f inline, hence before any task
// that callback submitted earlier. If the reactor stops
// before f ran, Call returns ErrClosed and f never runs; a waiter never
// outlives the loop.
//
// While the reactor is awake, the caller polls for its result (yielding its
// P in between) for up to Config.Spin, at most 200µs, before it blocks: a
// goroutine readied by the reactor lands in the run queue of the reactor's
// P, which the locked thread cannot run, and waits until another thread
// wakes up and steals it, which costs tens of microseconds.
func (r *Reactor) Call(f func()) error {
	if r.OnReactor() {
		f()
		return nil
	}
	c := callPool.Get().(*callTask)
	c.f = f
	c.state.Store(callPending)
	if err := r.Submit(c); err != nil {
		c.f = nil
		callPool.Put(c)
		return err
	}
	if !r.pollCall(c) && c.state.CompareAndSwap(callPending, callParked) {
		select {
		case <-c.done:
		case <-r.done:
			// The loop sends on c.done before it closes r.done, so
			// this tells whether f ran.
			select {
			case <-c.done:
			default:
				return ErrClosed // c may still sit in the ring: not reused
			}
		}
	}
	c.f = nil
	callPool.Put(c)
	return nil
}

// maxCallPoll bounds the polling of a Call: beyond a couple of thread
// wake-ups, parking costs less than polling.
const maxCallPoll = 200 * time.Microsecond

// pollCall waits actively for c, for up to r.callPoll, and reports whether
// it completed. It gives up at once when polling would compete with the
// reactor for CPUs instead of saving a wake-up: when the loop is asleep in
// epoll_wait (it has to wake up before it can run c, and needs a P for it),
// or when GOMAXPROCS-1 other Calls already poll.
func (r *Reactor) pollCall(c *callTask) bool {
	if r.callPoll <= 0 || r.inWait.Load() {
		return false
	}
	if r.callPollers.Add(1) > r.maxPollers {
		r.callPollers.Add(-1)
		return false
	}
	defer r.callPollers.Add(-1)
	var start time.Time
	for i := 0; ; i++ {
		if c.state.Load() == callDone {
			return true
		}
		if i&15 == 15 {
			if r.inWait.Load() {
				return false
			}
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > r.callPoll {
				return false
			}
		}
		runtime.Gosched()
	}
}

// OnReactor reports whether the caller runs on the reactor's thread, that is,
// inside a callback. The loop goroutine is locked to its thread, so comparing
// thread ids is exact.
func (r *Reactor) OnReactor() bool {
	tid := r.tid.Load()
	return tid != 0 && gettid() == tid
}

// Stop asks the loop to end after its current iteration (NetIO's
// netio_terminate). It does not wait; it is safe from any goroutine,
// including callbacks, and may be called more than once. After Stop, Submit
// and Call return ErrClosed.
func (r *Reactor) Stop() {
	if r.stopping.Swap(true) {
		return
	}
	r.wake()
}

// Wait blocks until the loop goroutine has exited. Calling it from a
// callback deadlocks.
func (r *Reactor) Wait() { <-r.done }

// Done returns a channel that is closed when the loop has exited.
func (r *Reactor) Done() <-chan struct{} { return r.done }

// Close stops the loop, waits for it to exit and closes every descriptor the
// reactor owns: epoll, the doorbell, and every Timer and Signal not closed
// yet. Descriptors passed to Register are the caller's and stay open. Tasks
// still queued are dropped without running; blocked Calls return ErrClosed.
// Close is idempotent. Called from a callback, it cannot wait: it stops the
// loop, which releases the descriptors as it exits.
func (r *Reactor) Close() error {
	r.Stop()
	if r.OnReactor() {
		r.closeOnExit.Store(true)
		return nil
	}
	<-r.done
	r.cleanupOnce.Do(r.cleanup)
	return nil
}

// cleanup releases everything once the loop has exited.
func (r *Reactor) cleanup() {
	r.ownMu.Lock()
	owned := r.owned
	r.owned = nil
	r.closed = true
	r.ownMu.Unlock()
	for o := range owned {
		o.closeFD()
	}

	r.bellMu.Lock()
	r.bellClosed = true
	unix.Close(r.bellfd)
	r.bellMu.Unlock()
	unix.Close(r.epfd)
	if r.blind.fd >= 0 {
		unix.Close(r.blind.fd)
	}
	if r.park != nil {
		r.park.close()
	}

	// Drop queued tasks so that they can be collected. The loop has
	// exited, so this goroutine is now the only consumer.
	for {
		if _, ok := r.ring.pop(); !ok {
			break
		}
	}
	r.ovMu.Lock()
	r.ovList = nil
	r.ovLen.Store(0)
	r.ovMu.Unlock()
	r.ovSpare = nil
	r.slots = nil
	r.pollers = nil
}

// Stats returns the reactor's counters.
func (r *Reactor) Stats() Stats {
	return Stats{
		Tasks:          r.stats.tasks.Load(),
		Overflows:      r.stats.overflows.Load(),
		Spins:          r.stats.spins.Load(),
		Sleeps:         r.stats.sleeps.Load(),
		Wakeups:        r.stats.wakeups.Load(),
		TimedSleeps:    r.stats.timed.Load(),
		DoorbellWrites: r.stats.doorbells.Load(),
	}
}
