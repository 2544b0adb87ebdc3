package netio_test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Tests that need a second process (one that is killed, stopped, or short
// of descriptors) re-execute the test binary with an environment variable
// that makes one Test function play the child.

// child is a running child process and its stdout, line by line.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// startChildCmd starts cmd, a child that reports on stdout line by line and
// ends when its stdin closes; it is killed at the end of the test.
func startChildCmd(t *testing.T, cmd *exec.Cmd) *child {
	t.Helper()
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
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	return c
}

// waitFor returns the child's first line that starts with prefix.
func (c *child) waitFor(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.NewTimer(5 * hangTimeout)
	defer timeout.Stop()
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited before a line starting %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout.C:
			t.Fatalf("no line starting %q from the child", prefix)
		}
	}
}
