package netio_test

import (
	"bytes"
	"errors"
	"net"
	"testing"

	"github.com/netio-go/netio"
)

func TestMaxMessageSizeDialer(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, s := dialAccept(t, ln, netio.WithMaxMessageSize(1000))
	n, err := c.Write(make([]byte, 1001))
	if !errors.Is(err, netio.ErrMessageTooLarge) || n != 0 {
		t.Fatalf("Write of 1001 bytes with a 1000-byte limit: %d, %v; want 0, ErrMessageTooLarge", n, err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "write" {
		t.Fatalf("Write error %T %v; want a *net.OpError with Op \"write\"", err, err)
	}
	echo(t, c, s, bytes.Repeat([]byte{'m'}, 1000))
	// The listener side learnt the dialer's limit in the handshake.
	if _, err := s.Write(make([]byte, 1001)); !errors.Is(err, netio.ErrMessageTooLarge) {
		t.Fatalf("listener-side Write of 1001 bytes to a dialer accepting 1000: %v; want ErrMessageTooLarge", err)
	}
	echo(t, s, c, bytes.Repeat([]byte{'n'}, 1000))
}

func TestMaxMessageSizeListener(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithMaxMessageSize(1000), netio.WithBufferSize(4096))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, s := dialAccept(t, ln) // the dialer has no limit of its own
	for _, size := range []int{1001, 5000, 1 << 20} {
		if _, err := c.Write(make([]byte, size)); !errors.Is(err, netio.ErrMessageTooLarge) {
			t.Fatalf("dialer Write of %d bytes to a listener accepting 1000: %v; want ErrMessageTooLarge (learnt from the handshake)", size, err)
		}
	}
	if _, err := s.Write(make([]byte, 1001)); !errors.Is(err, netio.ErrMessageTooLarge) {
		t.Fatalf("listener Write of 1001 bytes with its own 1000-byte limit: %v; want ErrMessageTooLarge", err)
	}
	echo(t, c, s, bytes.Repeat([]byte{'q'}, 1000))
}
