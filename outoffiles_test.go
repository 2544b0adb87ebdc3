package netio_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// A listener in a process out of file descriptors: a child process with a
// low RLIMIT_NOFILE listens, and plain TCP sockets that never send a
// request take its last descriptors (libfabric accepts each and waits for
// its request). Before, the reactor then spun on the listening socket it
// could not accept from; now the listener pauses, counts it, and takes
// requests again once descriptors are free.

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
// it has open, and answers "stats" on stdin until "quit".
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
	fmt.Println("ADDR", ln.Addr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "stats":
			st := ln.Stats()
			fmt.Println("STATS", st.AcceptPauses, st.Accepted)
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
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
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
	for deadline := time.Now().Add(hangTimeout); ; time.Sleep(10 * time.Millisecond) {
		if pauses, _ := stats(); pauses > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the listener, out of descriptors, never paused in %v", hangTimeout)
		}
	}

	closeRaws()
	d, err := netio.Dial("tcp", addr, netio.WithConnectTimeout(hangTimeout))
	if err != nil {
		t.Fatalf("Dial once the idle sockets left: %v", err)
	}
	d.Close()
	for deadline := time.Now().Add(hangTimeout); ; time.Sleep(10 * time.Millisecond) {
		if _, accepted := stats(); accepted == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the listener did not count the connection in %v", hangTimeout)
		}
	}
	fmt.Fprintln(stdin, "quit")
	stdin.Close()
	exited = true
	if err := cmd.Wait(); err != nil {
		t.Errorf("child: %v", err)
	}
}
