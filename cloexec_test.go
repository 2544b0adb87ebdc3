package netio_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/netio-go/netio"
)

// A child process started while a listener and a connection are up
// inherits none of libfabric's descriptors: after Listener.Close the port
// is free again, though the child still runs.
func TestChildInheritsNoFabricDescriptors(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := netio.Dial("tcp", addr)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	defer c.Close()
	if s := <-accepted; s != nil {
		defer s.Close()
	}

	kid := startChildCmd(t, exec.Command("cat"))
	// The child may hold what the test process inherited itself; a
	// socket, epoll or eventfd can only be libfabric's or netio's.
	dir := fmt.Sprintf("/proc/%d/fd", kid.cmd.Process.Pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		target, _ := os.Readlink(dir + "/" + fd.Name())
		if strings.HasPrefix(target, "socket:") || strings.HasPrefix(target, "anon_inode:") {
			t.Errorf("the child inherited descriptor %s -> %s", fd.Name(), target)
		}
	}

	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := netio.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s after Close, with a child started before it: %v", addr, err)
	}
	again.Close()
}
