package doorbell

import "golang.org/x/sys/unix"

func newEventfd() (int, error) { return unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC) }
