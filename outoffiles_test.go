package netio_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// A listener in a process out of file descriptors: a child process with a
// low RLIMIT_NOFILE listens. Connections it accepts and holds take its
// descriptors until a request cannot be served: the dialer is told so
// (ErrRejected, or a timeout), not left with EINPROGRESS. Then plain TCP
// sockets that never send a request take its last descriptors (libfabric
// accepts each and waits for its request). Before, the reactor then spun
// on the listening socket it could not accept from; now the listener
// pauses, counts it, and takes requests again once descriptors are free.

const filesChildEnv = "NETIO_FILES_CHILD"

// filesSpare is how many descriptors the child has left once it listens.
const filesSpare = 16

// TestOutOfFilesChild is the child's entry point; as a test of its own it
// does nothing.
func TestOutOfFilesChild(t *testing.T) {
	if os.Getenv(filesChildEnv) != "" {
		filesChild()
	}
}

// filesChild listens, lowers its descriptor limit to filesSpare above what
// it has open, accepts and holds connections, and answers "stats" and
// "drain" (close the connections held) on stdin until "quit".
func filesChild() {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("ERR", err)
		return
	}
	defer ln.Close()
	open, err := openFiles()
	if err != nil {
		fmt.Println("ERR", err)
		return
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		fmt.Println("ERR", err)
		return
	}
	rl.Cur = uint64(open + filesSpare)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		fmt.Println("ERR", err)
		return
	}
	var mu sync.Mutex
	var held []*netio.Conn
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		for {
			c, err := ln.AcceptConn()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	drain := func() {
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		held = nil
		mu.Unlock()
	}
	defer func() {
		// The connections the accepting goroutine may still take first.
		ln.Close()
		<-accepting
		drain()
	}()
	fmt.Println("ADDR", ln.Addr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "stats":
			st := ln.Stats()
			fmt.Println("STATS", st.AcceptPauses, st.Accepted)
		case "drain":
			drain()
			fmt.Println("DRAINED")
		case "quit":
			return
		}
	}
}

// openFiles counts the process's open descriptors.
func openFiles() (int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	return len(ents) - 1, err // less the directory's own
}

func TestListenerOutOfFiles(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestOutOfFilesChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), filesChildEnv+"=1")
	c := startChildCmd(t, cmd)
	stdin := c.stdin
	exited := false
	defer func() {
		if !exited {
			stdin.Close()
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	var addr string
	switch l := c.waitFor(t, ""); {
	case strings.HasPrefix(l, "ERR "):
		t.Skipf("the child could not set up: %s", l)
	case strings.HasPrefix(l, "ADDR "):
		addr = strings.TrimPrefix(l, "ADDR ")
	default:
		t.Fatalf("child said %q", l)
	}
	stats := func() (pauses, accepted uint64) {
		t.Helper()
		fmt.Fprintln(stdin, "stats")
		if _, err := fmt.Sscanf(c.waitFor(t, "STATS "), "STATS %d %d", &pauses, &accepted); err != nil {
			t.Fatal(err)
		}
		return pauses, accepted
	}

	// Connections until one cannot be served: its Dial is rejected or
	// times out (the child may be unable even to accept the socket).
	var dialed []*netio.Conn
	for failed := false; !failed; {
		if len(dialed) > filesSpare {
			t.Fatalf("%d connections to a child with %d descriptors to spare all succeeded", len(dialed), filesSpare)
		}
		d, err := netio.Dial("tcp", addr, netio.WithConnectTimeout(2*time.Second))
		if err == nil {
			dialed = append(dialed, d)
			continue
		}
		failed = true
		t.Logf("Dial to a child out of descriptors: %v", err)
		if !errors.Is(err, netio.ErrRejected) && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("Dial to a child out of descriptors: %v; want ErrRejected, ECONNREFUSED or a timeout", err)
		}
	}
	for _, d := range dialed {
		d.Close()
	}
	fmt.Fprintln(stdin, "drain")
	c.waitFor(t, "DRAINED")

	var raws []net.Conn
	closeRaws := func() {
		for _, r := range raws {
			r.Close()
		}
		raws = nil
	}
	defer closeRaws()
	for i := 0; i < 3*filesSpare; i++ {
		r, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, r)
	}
	eventually(t, "the listener, out of descriptors, pausing", func() bool {
		pauses, _ := stats()
		return pauses > 0
	})

	// Once they have left: libfabric notices as it reads their sockets,
	// so the first Dials may still find the child short.
	closeRaws()
	// Dials again a while apart: each one costs the child descriptors.
	for deadline := time.Now().Add(hangTimeout); ; time.Sleep(10 * time.Millisecond) { // a retry pace
		d, err := netio.Dial("tcp", addr, netio.WithConnectTimeout(hangTimeout))
		if err == nil {
			d.Close()
			break
		}
		if !errors.Is(err, netio.ErrRejected) || time.Now().After(deadline) {
			t.Fatalf("Dial once the idle sockets left: %v", err)
		}
	}
	eventually(t, "the listener counting the last connection", func() bool {
		_, accepted := stats()
		return accepted == uint64(len(dialed))+1
	})
	fmt.Fprintln(stdin, "quit")
	stdin.Close()
	exited = true
	if err := cmd.Wait(); err != nil {
		t.Errorf("child: %v", err)
	}
}
