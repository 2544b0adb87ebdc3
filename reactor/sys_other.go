//go:build !linux

package reactor

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Where epoll, eventfd and timerfd do not exist the package compiles, and
// New fails with an error that errors.Is errors.ErrUnsupported.

var errNotLinux = fmt.Errorf("netio needs cgo and libfabric on Linux, and this program was built for %s: %w", runtime.GOOS, errors.ErrUnsupported)

type epollEvent struct {
	Events uint32
	Fd     int32
	Pad    int32
}

const (
	epollIn     = 0x1
	epollCtlAdd = 1
	epollCtlDel = 2
	epollCtlMod = 3
)

func epollCreate() (int, error)                                      { return -1, errNotLinux }
func epollCtl(epfd, op, fd int, ev *epollEvent) error                { return errNotLinux }
func epollWait(epfd int, events []epollEvent, msec int) (int, error) { return 0, errNotLinux }
func newEventfd(semaphore bool) (int, error)                         { return -1, errNotLinux }
func newTimerfd() (int, error)                                       { return -1, errNotLinux }
func setTimerfd(fd int, value, interval time.Duration) error         { return errNotLinux }
func gettid() int32                                                  { return 0 }
func schedYield()                                                    { runtime.Gosched() }
