package reactor

import (
	"time"

	"golang.org/x/sys/unix"
)

// The Linux calls the reactor is made of: epoll, eventfd, timerfd. They
// are kept here so that the package also compiles where they do not exist
// (sys_other.go), where New fails instead.

type epollEvent = unix.EpollEvent

const (
	epollIn     = unix.EPOLLIN
	epollCtlAdd = unix.EPOLL_CTL_ADD
	epollCtlMod = unix.EPOLL_CTL_MOD
	epollCtlDel = unix.EPOLL_CTL_DEL
)

func epollCreate() (int, error) { return unix.EpollCreate1(unix.EPOLL_CLOEXEC) }

func epollCtl(epfd, op, fd int, ev *epollEvent) error { return unix.EpollCtl(epfd, op, fd, ev) }

func epollWait(epfd int, events []epollEvent, msec int) (int, error) {
	return unix.EpollWait(epfd, events, msec)
}

// newEventfd is a non-blocking eventfd, counting (semaphore false) or
// handing out one at a time.
func newEventfd(semaphore bool) (int, error) {
	flags := unix.EFD_NONBLOCK | unix.EFD_CLOEXEC
	if semaphore {
		flags |= unix.EFD_SEMAPHORE
	}
	return unix.Eventfd(0, flags)
}

func newTimerfd() (int, error) {
	return unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
}

func setTimerfd(fd int, value, interval time.Duration) error {
	spec := unix.ItimerSpec{
		Interval: unix.NsecToTimespec(int64(interval)),
		Value:    unix.NsecToTimespec(int64(value)),
	}
	return unix.TimerfdSettime(fd, 0, &spec, nil)
}

func gettid() int32 { return int32(unix.Gettid()) }

func schedYield() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
