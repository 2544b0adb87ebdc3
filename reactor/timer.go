package reactor

import (
	"errors"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// fdObj is a descriptor the reactor owns (a timerfd or an eventfd),
// registered in its epoll set and closed by the owner's Close or by the
// reactor's Close, whichever comes first.
type fdObj struct {
	r      *Reactor
	fd     int
	cb     func()
	mu     sync.RWMutex // guards closed, and fd against being closed while used
	closed bool
}

// HandleEvents reads the descriptor once and runs the callback if the read
// got a value. For a timer the read returns the expiry count and resets it
// (several missed expiries give one callback); EAGAIN means the timer was
// stopped or re-armed since it fired. For a semaphore eventfd it takes one
// unit, so the callback runs once per Fire.
func (o *fdObj) HandleEvents(uint32) {
	if n, err := unix.Read(o.fd, o.r.scratch[:]); err == nil && n == 8 {
		o.cb()
	}
}

// open creates the object for a new descriptor and registers it.
func (r *Reactor) open(fd int, cb func()) (*fdObj, error) {
	o := &fdObj{r: r, fd: fd, cb: cb}
	r.ownMu.Lock()
	if r.closed {
		r.ownMu.Unlock()
		unix.Close(fd)
		return nil, ErrClosed
	}
	r.owned[o] = struct{}{}
	r.ownMu.Unlock()
	if err := r.Register(fd, epollIn, o); err != nil {
		o.close()
		return nil, err
	}
	return o, nil
}

// closeFD closes the descriptor unless that was done already, and reports
// whether this call did it. Used once the loop has exited.
func (o *fdObj) closeFD() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	o.closed = true
	unix.Close(o.fd)
	return true
}

// close unregisters and closes the descriptor.
func (o *fdObj) close() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return ErrClosed
	}
	o.closed = true
	o.mu.Unlock()

	r := o.r
	if err := r.Call(func() { r.unregister(o.fd) }); err != nil {
		// The loop is stopping: wait until it can no longer read fd.
		<-r.done
	}
	r.ownMu.Lock()
	delete(r.owned, o)
	r.ownMu.Unlock()
	if err := unix.Close(o.fd); err != nil {
		return os.NewSyscallError("close", err)
	}
	return nil
}

// Timer runs a callback on the reactor when a timerfd expires.
type Timer struct {
	o *fdObj
}

// NewTimer creates a stopped timer (a CLOCK_MONOTONIC timerfd) whose cb runs
// on the reactor thread at each expiry. If the reactor falls behind, several
// expiries give one call. cb must not block.
func (r *Reactor) NewTimer(cb func()) (*Timer, error) {
	if cb == nil {
		return nil, errors.New("reactor: nil timer callback")
	}
	fd, err := newTimerfd()
	if err != nil {
		return nil, os.NewSyscallError("timerfd_create", err)
	}
	o, err := r.open(fd, cb)
	if err != nil {
		return nil, err
	}
	return &Timer{o: o}, nil
}

// Start arms the timer to fire every period, the first time one period from
// now. Starting a running timer restarts it with the new period.
func (t *Timer) Start(period time.Duration) error {
	if period <= 0 {
		return errors.New("reactor: timer period must be positive")
	}
	return t.set(period, period)
}

// StartOnce arms the timer to fire once, after the given delay (at once if
// it is not positive), replacing any earlier setting.
func (t *Timer) StartOnce(after time.Duration) error {
	if after <= 0 {
		after = 1 // zero would disarm
	}
	return t.set(after, 0)
}

// StartOnceFromReactor is StartOnce for code already on the reactor thread
// (a callback, a poller, a task): it programs the timerfd directly, without
// the closure and hop of Call, so a timer re-armed often allocates nothing.
func (t *Timer) StartOnceFromReactor(after time.Duration) error {
	if after <= 0 {
		after = 1
	}
	o := t.o
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.closed {
		return ErrClosed
	}
	if e := setTimerfd(o.fd, after, 0); e != nil {
		return os.NewSyscallError("timerfd_settime", e)
	}
	return nil
}

// Stop disarms the timer. Once Stop returns the callback does not run again
// until the timer is started again, even if it had expired already.
func (t *Timer) Stop() error {
	return t.set(0, 0)
}

// set programs the timerfd on the reactor thread, so that it is ordered with
// the handler: re-arming resets the expiry count, and the handler's next
// read finds nothing.
func (t *Timer) set(value, interval time.Duration) error {
	o := t.o
	var err error
	cerr := o.r.Call(func() {
		o.mu.RLock()
		defer o.mu.RUnlock()
		if o.closed {
			err = ErrClosed
			return
		}
		if e := setTimerfd(o.fd, value, interval); e != nil {
			err = os.NewSyscallError("timerfd_settime", e)
		}
	})
	if cerr != nil {
		return cerr
	}
	return err
}

// Close stops the timer and releases its descriptor. It returns ErrClosed
// if the timer (or its reactor) was closed already.
func (t *Timer) Close() error { return t.o.close() }

// Signal runs a callback on the reactor once per Fire, from any goroutine
// (NetIO's signal: an eventfd in semaphore mode).
type Signal struct {
	o *fdObj
}

// NewSignal creates a signal whose cb runs on the reactor thread once for
// every Fire. cb must not block.
func (r *Reactor) NewSignal(cb func()) (*Signal, error) {
	if cb == nil {
		return nil, errors.New("reactor: nil signal callback")
	}
	fd, err := newEventfd(true)
	if err != nil {
		return nil, os.NewSyscallError("eventfd", err)
	}
	o, err := r.open(fd, cb)
	if err != nil {
		return nil, err
	}
	return &Signal{o: o}, nil
}

// Fire makes the callback run once more on the reactor. It never blocks and
// is safe from any goroutine, including callbacks; it costs one eventfd
// write (and a wake-up if the reactor sleeps).
func (s *Signal) Fire() error {
	o := s.o
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.closed || o.r.stopping.Load() {
		return ErrClosed
	}
	if _, err := unix.Write(o.fd, one[:]); err != nil {
		return os.NewSyscallError("write", err)
	}
	return nil
}

// Close releases the signal's descriptor; fires not yet handled are
// dropped. It returns ErrClosed if the signal (or its reactor) was closed
// already.
func (s *Signal) Close() error { return s.o.close() }
