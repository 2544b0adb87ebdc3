//go:build cgo && linux

package ofi_test

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/netio-go/netio/ofi"
)

const lockHolderEnv = "NETIO_OFI_LOCK_HOLDER"

// A peer process that holds its shm region's lock does not stop the
// sender, which shm would have spin on that lock inside fi_tsend: while
// the peer lives the send is refused for now (EAGAIN), and once it was
// killed holding the lock, for good (ECONNRESET).
func TestRDMShmPeerDiedHoldingLock(t *testing.T) {
	l := openRDM(t, ofi.RDMHints{Provider: "shm"}, 64)
	cmd := exec.Command(os.Args[0], "-test.run=^TestRDMShmLockHolderChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockHolderEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var name string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if n, ok := strings.CutPrefix(sc.Text(), "LOCKED "); ok {
			name = n
			break
		}
	}
	if name == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the child did not report its locked region")
	}
	// Its region stays in /dev/shm after SIGKILL.
	defer os.Remove("/dev/shm/" + strings.TrimPrefix(name, "fi_shm://"))
	a, err := ofi.ParseAddress(name)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := l.av.Insert(a)
	if err != nil {
		t.Fatal(err)
	}
	// Alive and holding its lock, the peer is waited for, not spun on.
	send := func(inject int) error {
		_, err := l.ep.PostTaggedSend(l.region, []ofi.RDMSegment{{Len: 64, Token: 1, Peer: fi, Tag: 1}}, inject)
		return err
	}
	if err := send(0); !errors.Is(err, ofi.EAGAIN) {
		t.Fatalf("send to a live peer holding its lock: %v, want EAGAIN", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	for _, inject := range []int{0, l.info.InjectSize()} {
		if err := send(inject); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("send (inject %d) to a peer that died holding its lock: %v, want ECONNRESET", inject, err)
		}
	}
}

// TestRDMShmLockHolderChild is the peer of TestRDMShmPeerDiedHoldingLock:
// it takes its own region's lock and waits to be killed.
func TestRDMShmLockHolderChild(t *testing.T) {
	if os.Getenv(lockHolderEnv) == "" {
		t.Skip("run by TestRDMShmPeerDiedHoldingLock")
	}
	n := openRDM(t, ofi.RDMHints{Provider: "shm"}, 16)
	if err := ofi.HoldShmLock(n.name); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("LOCKED " + n.name.String() + "\n")
	io.Copy(io.Discard, os.Stdin) // until killed
}
