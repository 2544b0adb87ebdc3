package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// runner starts the two processes of one run and collects the result.
type runner struct {
	exe             string // re-executed with childEnv set
	warmup, measure time.Duration
	// cPeer is the built C peer (csrc/zmq_thr.c) for modes with cArgs;
	// when it could not be built, cPeerErr says why and those runs fail.
	cPeer    string
	cPeerErr error
}

// child is one running process of a run.
type child struct {
	role   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser // publish/subscribe publishers only: the parent's GO
	lines  chan string    // its standard output, closed at EOF
	done   chan struct{}  // closed once it has exited and its stderr is in
	stderr tailBuffer
}

func (r *runner) start(m *mode, a childArgs) (*child, error) {
	c := &child{role: a.Role, lines: make(chan string, 16), done: make(chan struct{})}
	if m.cArgs != nil {
		if r.cPeer == "" {
			err := r.cPeerErr
			if err == nil {
				err = errors.New("the C peer was not built")
			}
			return nil, err
		}
		c.cmd = exec.Command(r.cPeer, m.cArgs(&a)...)
	} else {
		c.cmd = exec.Command(r.exe, a.flags()...)
		c.cmd.Env = append(os.Environ(), childEnv+"=1")
	}
	c.cmd.Stderr = &c.stderr
	if m.subs > 0 && a.Role == "server" {
		in, err := c.cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		c.stdin = in
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			c.lines <- s.Text()
		}
		io.Copy(io.Discard, out)
		close(c.lines)
		c.cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// stop kills the process (it may have exited already) and reaps it.
func (c *child) stop() {
	c.cmd.Process.Kill()
	for range c.lines {
	}
	<-c.done
}

// expect waits for a line starting with prefix from c, failing when c
// ends first, when other ends and c has said nothing within a grace period
// (the sender dies of the receiver's exit, sometimes before the parent has
// read the receiver's last line), or when the timeout passes.
func expect(c, other *child, prefix string, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	otherLines := other.lineChan()
	var grace <-chan time.Time
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				<-c.done
				return "", fmt.Errorf("%s exited before %s: %s", c.name(), strings.TrimSpace(prefix), c.stderr.String())
			}
			if rest, found := strings.CutPrefix(l, prefix); found {
				return rest, nil
			}
		case _, ok := <-otherLines:
			if !ok {
				otherLines, grace = nil, time.After(3*time.Second)
			}
		case <-grace:
			<-other.done
			return "", fmt.Errorf("%s exited: %s", other.name(), other.stderr.String())
		case <-t.C:
			return "", fmt.Errorf("no %s from %s in %v", strings.TrimSpace(prefix), c.name(), timeout)
		}
	}
}

func (c *child) lineChan() chan string {
	if c == nil {
		return nil
	}
	return c.lines
}

func (c *child) name() string {
	if c == nil {
		return "?"
	}
	return c.role
}

// run measures one point once: a fresh server process, a fresh client
// process, the result from the side that times.
func (r *runner) run(m *mode, size int) (*Result, error) {
	if m.subs > 0 {
		return r.runPubSub(m, size)
	}
	a := childArgs{Role: "server", Mode: m.name, Size: size, Warmup: r.warmup, Measure: r.measure}
	srv, err := r.start(m, a)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	addr, err := expect(srv, nil, "ADDR ", 30*time.Second)
	if err != nil {
		return nil, err
	}
	a.Role, a.Addr = "client", addr
	cli, err := r.start(m, a)
	if err != nil {
		return nil, err
	}
	defer cli.stop()
	timer, other := srv, cli
	if m.timedBy == "client" {
		timer, other = cli, srv
	}
	line, err := expect(timer, other, "RESULT ", r.warmup+r.measure+60*time.Second)
	if err != nil {
		return nil, err
	}
	res := new(Result)
	if err := json.Unmarshal([]byte(line), res); err != nil {
		return nil, err
	}
	return res, nil
}

// tailBuffer keeps the last 2 KiB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2048 {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-2048:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSpace(string(b.buf))
	if s == "" {
		return "(no output)"
	}
	return s
}

var errNoRuns = errors.New("no run succeeded")
