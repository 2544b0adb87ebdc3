package netio_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// The kill tests re-execute the test binary as a child process that holds
// one end of a connection, then SIGKILL it: the surviving end must notice
// at once, as it would with a TCP socket.

const (
	childEnv     = "NETIO_TEST_CHILD" // role of the child: "dial" or "listen"
	childAddrEnv = "NETIO_TEST_ADDR"  // address the dialing child connects to
	childAddrTag = "NETIO_CHILD_ADDR="
	childHello   = "hello from the child"
)

// childBlock keeps a child alive until its parent kills it, closes its
// stdin (the parent died) or 2 minutes pass, and never returns to the testing
// package (whose leak check would have nothing sensible to say).
func childBlock() {
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
	}
	os.Exit(0)
}

func childFatal(format string, args ...any) {
	os.Stderr.WriteString("netio kill child: " + strings.TrimSpace(fmt.Sprintf(format, args...)) + "\n")
	os.Exit(3)
}

// startChild runs this test binary's test named test as a child with the
// given role; it returns the command and its stdout.
func startChild(t *testing.T, test, role, addr string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+role, childAddrEnv+"="+addr)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	_ = stdin // closed by Wait; the child blocks reading it
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, bufio.NewReader(stdout)
}

// checkPeerDeath kills the child holding the other end of c and checks that
// a Read blocked on c fails with a connection error, as a dead TCP peer
// would make it (not a time-out: nothing would end it but a keep-alive
// probe, hours later), and that Write fails afterwards.
func checkPeerDeath(t *testing.T, cmd *exec.Cmd, c *netio.Conn) {
	t.Helper()
	type result struct {
		n   int
		err error
		at  time.Time
	}
	readDone := make(chan result, 1)
	go func() {
		n, err := c.Read(make([]byte, 100))
		readDone <- result{n, err, time.Now()}
	}()
	// Let the Read block first.
	waitBlocked(t, 1, "netio.(*Conn).Read")
	select {
	case r := <-readDone:
		t.Fatalf("Read returned before the peer was killed: %d, %v", r.n, r.err)
	default:
	}
	killed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-readDone:
	case <-time.After(hangTimeout):
		// Unblock the reader so the test ends cleanly.
		c.Close()
		<-readDone
		t.Fatalf("Read still blocked %v after the peer was killed with SIGKILL: a dead peer must end the connection", hangTimeout)
	}
	t.Logf("Read returned %v after %v", r.err, r.at.Sub(killed))
	if r.err == nil {
		t.Fatalf("Read after the peer was killed: %d bytes, nil error; want an error", r.n)
	}
	var ne net.Error
	if errors.As(r.err, &ne) && ne.Timeout() {
		t.Fatalf("Read after the peer was killed: %v is a time-out; want a connection error", r.err)
	}
	switch {
	case r.err == io.EOF:
		t.Logf("dead peer seen as io.EOF")
	case errors.Is(r.err, syscall.ECONNRESET):
		var oe *net.OpError
		if !errors.As(r.err, &oe) || oe.Op != "read" {
			t.Fatalf("Read after the peer was killed: %T %v; want a *net.OpError with Op \"read\"", r.err, r.err)
		}
		t.Logf("dead peer seen as ECONNRESET in a *net.OpError")
	default:
		t.Fatalf("Read after the peer was killed: %T %v; want io.EOF or a *net.OpError wrapping ECONNRESET", r.err, r.err)
	}
	_, err := c.Write([]byte("anyone there?"))
	if err == nil {
		t.Fatalf("Write after the peer was killed succeeded; want an error")
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "write" {
		t.Fatalf("Write after the peer was killed: %T %v; want a *net.OpError with Op \"write\"", err, err)
	}
	if errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after the peer was killed: %v; net.ErrClosed means *we* closed the Conn", err)
	}
	t.Logf("Write after death: %v", err)
}

// TestKillDialer: the peer that dialed us dies with SIGKILL.
func TestKillDialer(t *testing.T) {
	if os.Getenv(childEnv) == "dial" {
		c, err := netio.Dial("tcp", os.Getenv(childAddrEnv))
		if err != nil {
			childFatal("Dial: %v", err)
		}
		if _, err := c.Write([]byte(childHello)); err != nil {
			childFatal("Write: %v", err)
		}
		childBlock()
		return
	}
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd, _ := startChild(t, "TestKillDialer", "dial", ln.Addr().String())

	acc := make(chan *netio.Conn, 1)
	go func() {
		c, _ := ln.AcceptConn()
		acc <- c
	}()
	var s *netio.Conn
	select {
	case s = <-acc:
	case <-time.After(hangTimeout):
		ln.Close()
		<-acc
		t.Fatal("the child never connected")
	}
	if s == nil {
		t.Fatal("Accept failed")
	}
	defer s.Close()
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	buf := make([]byte, 100)
	n, err := s.ReadMessage(buf)
	if err != nil || string(buf[:n]) != childHello {
		t.Fatalf("ReadMessage from the child: %q, %v", buf[:n], err)
	}
	s.SetReadDeadline(time.Time{})
	checkPeerDeath(t, cmd, s)
}

// TestKillListener: the process we dialed dies with SIGKILL.
func TestKillListener(t *testing.T) {
	if os.Getenv(childEnv) == "listen" {
		ln, err := netio.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			childFatal("Listen: %v", err)
		}
		os.Stdout.WriteString(childAddrTag + ln.Addr().String() + "\n")
		c, err := ln.AcceptConn()
		if err != nil {
			childFatal("Accept: %v", err)
		}
		if _, err := c.Write([]byte(childHello)); err != nil {
			childFatal("Write: %v", err)
		}
		childBlock()
		return
	}
	cmd, out := startChild(t, "TestKillListener", "listen", "")
	addrc := make(chan string, 1)
	go func() {
		for {
			line, err := out.ReadString('\n')
			if a, ok := strings.CutPrefix(strings.TrimSpace(line), childAddrTag); ok {
				addrc <- a
				return
			}
			if err != nil {
				addrc <- ""
				return
			}
		}
	}()
	var addr string
	select {
	case addr = <-addrc:
	case <-time.After(hangTimeout):
		t.Fatal("the child never reported its address")
	}
	if addr == "" {
		t.Fatal("the child exited without listening")
	}
	c, err := netio.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(hangTimeout))
	buf := make([]byte, 100)
	n, err := c.ReadMessage(buf)
	if err != nil || string(buf[:n]) != childHello {
		t.Fatalf("ReadMessage from the child: %q, %v", buf[:n], err)
	}
	c.SetReadDeadline(time.Time{})
	checkPeerDeath(t, cmd, c)
}

// TestKillBlockedWriter: we are blocked writing to a peer that stopped
// reading (its window is full) when it dies with SIGKILL; the Write must
// fail at once instead of waiting for credits that will never come.
func TestKillBlockedWriter(t *testing.T) {
	if os.Getenv(childEnv) == "dial-noread" {
		c, err := netio.Dial("tcp", os.Getenv(childAddrEnv), netio.WithWindow(4), netio.WithBufferSize(4096))
		if err != nil {
			childFatal("Dial: %v", err)
		}
		if _, err := c.Write([]byte(childHello)); err != nil {
			childFatal("Write: %v", err)
		}
		childBlock() // never reads again
		return
	}
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd, _ := startChild(t, "TestKillBlockedWriter", "dial-noread", ln.Addr().String())
	s := acceptOne(t, ln, hangTimeout)
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	buf := make([]byte, 100)
	if n, err := s.ReadMessage(buf); err != nil || string(buf[:n]) != childHello {
		t.Fatalf("ReadMessage from the child: %q, %v", buf[:n], err)
	}
	werr := make(chan error, 1)
	go func() {
		msg := make([]byte, 1000)
		for {
			if _, err := s.Write(msg); err != nil {
				werr <- err
				return
			}
		}
	}()
	waitBlocked(t, 1, "netio.(*Conn).Write") // on the full window
	select {
	case err := <-werr:
		t.Fatalf("Write to a peer that reads nothing failed before it was killed: %v", err)
	default:
	}
	killed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-werr:
		t.Logf("blocked Write returned %v after %v", err, time.Since(killed))
		var oe *net.OpError
		if !errors.As(err, &oe) || oe.Op != "write" {
			t.Fatalf("blocked Write after the peer was killed: %T %v; want a *net.OpError with Op \"write\"", err, err)
		}
		if errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("blocked Write after the peer was killed: %v; want a connection error", err)
		}
	case <-time.After(hangTimeout):
		s.Close()
		<-werr
		t.Fatalf("Write still blocked %v after the peer was killed with SIGKILL", hangTimeout)
	}
}
