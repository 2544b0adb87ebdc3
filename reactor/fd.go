package reactor

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Register adds fd to the reactor's epoll set, level-triggered, with the
// given events (unix.EPOLLIN, unix.EPOLLOUT, ...); h is called on the reactor
// thread whenever fd is ready. The descriptor stays the caller's: the
// reactor never closes it, and the caller must Unregister it before closing
// it. Safe from any goroutine; from another goroutine it costs a Call.
func (r *Reactor) Register(fd int, events uint32, h Handler) error {
	if h == nil {
		return errors.New("reactor: nil Handler")
	}
	var err error
	if cerr := r.Call(func() { err = r.register(fd, events, h) }); cerr != nil {
		return cerr
	}
	return err
}

// Modify changes the events watched for a registered fd.
func (r *Reactor) Modify(fd int, events uint32) error {
	var err error
	if cerr := r.Call(func() { err = r.modify(fd, events) }); cerr != nil {
		return cerr
	}
	return err
}

// Unregister removes fd from the reactor. Once it returns, the handler is
// not called again, not even for events already collected in the current
// iteration. If the removal from epoll fails (for instance because fd was
// closed already, which removes it implicitly), the handler is still
// forgotten and the error returned.
func (r *Reactor) Unregister(fd int) error {
	var err error
	if cerr := r.Call(func() { err = r.unregister(fd) }); cerr != nil {
		return cerr
	}
	return err
}

// register, modify and unregister run on the reactor thread.

func (r *Reactor) register(fd int, events uint32, h Handler) error {
	if _, dup := r.fdSlot[fd]; dup {
		return os.NewSyscallError("epoll_ctl", unix.EEXIST)
	}
	var s int32
	if n := len(r.free); n > 0 {
		s = r.free[n-1]
		r.free = r.free[:n-1]
	} else {
		s = int32(len(r.slots))
		r.slots = append(r.slots, slot{})
	}
	sl := &r.slots[s]
	ev := epollEvent{Events: events, Fd: s, Pad: sl.gen}
	if err := epollCtl(r.epfd, epollCtlAdd, fd, &ev); err != nil {
		r.free = append(r.free, s)
		return os.NewSyscallError("epoll_ctl", err)
	}
	sl.h = h
	sl.fd = fd
	r.fdSlot[fd] = s
	return nil
}

func (r *Reactor) modify(fd int, events uint32) error {
	s, ok := r.fdSlot[fd]
	if !ok {
		return os.NewSyscallError("epoll_ctl", unix.ENOENT)
	}
	ev := epollEvent{Events: events, Fd: s, Pad: r.slots[s].gen}
	if err := epollCtl(r.epfd, epollCtlMod, fd, &ev); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

func (r *Reactor) unregister(fd int) error {
	s, ok := r.fdSlot[fd]
	if !ok {
		return os.NewSyscallError("epoll_ctl", unix.ENOENT)
	}
	err := epollCtl(r.epfd, epollCtlDel, fd, nil)
	delete(r.fdSlot, fd)
	sl := &r.slots[s]
	sl.h = nil
	sl.fd = -1
	sl.gen++
	r.free = append(r.free, s)
	if err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

// AddPoller adds p to the pollers called on every iteration. Safe from any
// goroutine; from another goroutine it costs a Call.
func (r *Reactor) AddPoller(p Poller) error {
	if p == nil {
		return errors.New("reactor: nil Poller")
	}
	var err error
	if cerr := r.Call(func() {
		if _, blind := p.(BlindPoller); blind {
			if err = r.openBlind(); err != nil {
				return
			}
		}
		// Copy on write: an iteration in progress keeps indexing a
		// consistent slice.
		ps := make([]Poller, len(r.pollers), len(r.pollers)+1)
		copy(ps, r.pollers)
		r.pollers = append(ps, p)
	}); cerr != nil {
		return cerr
	}
	return err
}

// RemovePoller removes p (the first occurrence, if it was added more than
// once). Once it returns p is not called again.
func (r *Reactor) RemovePoller(p Poller) error {
	found := false
	if err := r.Call(func() {
		for i, q := range r.pollers {
			if q == p {
				ps := make([]Poller, 0, len(r.pollers)-1)
				ps = append(ps, r.pollers[:i]...)
				r.pollers = append(ps, r.pollers[i+1:]...)
				found = true
				return
			}
		}
	}); err != nil {
		return err
	}
	if !found {
		return errors.New("reactor: Poller not registered")
	}
	return nil
}
