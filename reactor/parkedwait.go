package reactor

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// parkedWait is how the loop sleeps when the program has one P
// (GOMAXPROCS=1, as Go sets it in a container limited to one CPU).
//
// epoll_wait(-1) is a system call that keeps the only P attached to the
// sleeping reactor thread: the goroutine the reactor has just woken (a
// reader parked on its eventfd, internal/doorbell) runs only once sysmon takes the P
// back, which made a 64 B round trip in one process 30 times slower than
// net.TCPConn's (docs/decisions/2026-11-23-parked-wait.md).
// Instead the loop waits for its epoll descriptor in Go's network poller,
// which parks the goroutine and hands the P to whoever can run; the poller
// wakes the loop when any of its descriptors, the doorbell included, is
// ready. With two or more Ps epoll_wait(-1) stays: it wakes the reactor
// thread directly, without a hand-over between threads.
type parkedWait struct {
	f   *os.File // a duplicate of the epoll descriptor, in the poller
	raw syscall.RawConn
	// poll is made once, so that a wait allocates nothing; it sets n.
	poll func(fd uintptr) bool
	r    *Reactor
	n    int
}

func newParkedWait(r *Reactor) (*parkedWait, error) {
	fd, err := unix.FcntlInt(uintptr(r.epfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("fcntl", err)
	}
	// os.NewFile puts only a non-blocking descriptor in the poller.
	// epoll_wait ignores O_NONBLOCK (shared with epfd): its timeout rules.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	p := &parkedWait{f: os.NewFile(uintptr(fd), "reactor-epoll"), r: r}
	if p.raw, err = p.f.SyscallConn(); err != nil {
		p.f.Close()
		return nil, err
	}
	p.poll = func(uintptr) bool { // looks at r's epoll instance, which fd shares
		p.n = p.r.wait(0)
		return p.n > 0
	}
	return p, nil
}

// wait returns the number of events collected into the reactor's events,
// like its wait(-1), having parked in the network poller until there were some.
// The poller's registration is edge-triggered: it is armed before the
// first look, so an event between that look and the park is not missed.
func (p *parkedWait) wait() int {
	p.n = 0
	if err := p.raw.Read(p.poll); err != nil {
		return 0 // closed: only by cleanup, once the loop has exited
	}
	return p.n
}

func (p *parkedWait) close() { p.f.Close() }
