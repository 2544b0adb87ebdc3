package netio

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/netio-go/netio/ofi"
	"golang.org/x/sys/unix"
)

// An shm endpoint counts as gone when its process is dead, or when its
// region is removed and no longer mapped; a region removed but still
// mapped (what SIGINT leaves, with the process running on) is not gone.
func TestShmEndpointGone(t *testing.T) {
	name := fmt.Sprintf("%d:%d:%d", os.Getpid(), os.Getuid(), 1<<30)
	addr, err := ofi.ParseAddress("fi_shm://" + name)
	if err != nil {
		t.Fatal(err)
	}
	path := "/dev/shm/" + name
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	defer os.Remove(path)
	defer f.Close()
	if err := f.Truncate(4096); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	if shmEndpointGone(addr) {
		t.Fatal("a region that is there and mapped: gone")
	}
	os.Remove(path)
	if shmEndpointGone(addr) {
		t.Fatal("a removed region its process still maps: gone")
	}
	unix.Munmap(m)
	if !shmEndpointGone(addr) {
		t.Fatal("a removed region nobody maps: not gone")
	}

	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	dead, err := ofi.ParseAddress(fmt.Sprintf("fi_shm://%d:%d:0", cmd.Process.Pid, os.Getuid()))
	if err != nil {
		t.Fatal(err)
	}
	if !shmEndpointGone(dead) {
		t.Fatalf("%q, of a process that exited: not gone", dead)
	}
	for _, bad := range []string{"fi_shm://x:0:0", "fi_shm://-1:0:0", "fi_shm://1/../2:0:0", "fi_sockaddr_in://127.0.0.1:80"} {
		a, err := ofi.ParseAddress(bad)
		if err != nil {
			continue
		}
		if shmEndpointGone(a) {
			t.Errorf("%q: gone", bad)
		}
	}
}
