package reactor

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// TestMain fails the run if a test leaks a goroutine (a reactor loop not
// stopped, a Call waiter left hanging) or a file descriptor (an epoll,
// eventfd or timerfd not closed).
func TestMain(m *testing.M) {
	// Let the runtime open whatever it opens lazily (the netpoller) before
	// counting.
	if f, w, err := os.Pipe(); err == nil {
		f.Close()
		w.Close()
	}
	before := countFDs()
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
		if after := countFDs(); after > before {
			fmt.Fprintf(os.Stderr, "fd leak: %d open descriptors before the tests, %d after\n", before, after)
			code = 1
		}
	}
	os.Exit(code)
}

func countFDs() int {
	fd, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		panic(err)
	}
	defer unix.Close(fd)
	n := 0
	buf := make([]byte, 64<<10)
	for {
		m, err := unix.ReadDirent(fd, buf)
		if err != nil {
			panic(err)
		}
		if m == 0 {
			break
		}
		_, c, _ := unix.ParseDirent(buf[:m], -1, nil)
		n += c
	}
	return n - 1 // the directory itself
}
