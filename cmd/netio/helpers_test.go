package main

import (
	"bytes"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// runTimeout bounds every command a test runs.
const runTimeout = 30 * time.Second

// listeningRE finds the address recv and pong print on stderr.
var listeningRE = regexp.MustCompile(`(?m)^listening on (\S+) \(provider \S+\)$`)

// watchWriter collects what a command writes and reports the first
// "listening on" address.
type watchWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	addr chan string
	sent bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.sent {
		if m := listeningRE.FindStringSubmatch(w.buf.String()); m != nil {
			w.addr <- m[1]
			w.sent = true
		}
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// proc is run() going on in a goroutine.
type proc struct {
	args   []string
	code   chan int
	stdout *watchWriter
	stderr *watchWriter
}

// start runs netio with args in this process.
func start(args ...string) *proc {
	p := &proc{
		args:   args,
		code:   make(chan int, 1),
		stdout: &watchWriter{addr: make(chan string, 1)},
		stderr: &watchWriter{addr: make(chan string, 1)},
	}
	go func() { p.code <- run(args, p.stdout, p.stderr) }()
	return p
}

// addr waits for the address the command listens on.
func (p *proc) addr(t *testing.T) string {
	t.Helper()
	select {
	case a := <-p.stderr.addr:
		return a
	case code := <-p.code:
		p.code <- code
		t.Fatalf("netio %s exited %d before listening; stderr:\n%s", strings.Join(p.args, " "), code, p.stderr)
	case <-time.After(runTimeout):
		t.Fatalf("netio %s did not listen within %v", strings.Join(p.args, " "), runTimeout)
	}
	return ""
}

// wait returns the exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-p.code:
		p.code <- code
		return code
	case <-time.After(runTimeout):
		t.Fatalf("netio %s did not end within %v", strings.Join(p.args, " "), runTimeout)
	}
	return 0
}

// mustExit checks the exit code.
func (p *proc) mustExit(t *testing.T, want int) {
	t.Helper()
	if code := p.wait(t); code != want {
		t.Fatalf("netio %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(p.args, " "), code, want, p.stdout, p.stderr)
	}
}

// field finds re in s and returns its first group as a number.
func field(t *testing.T, s string, re string) float64 {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no %q in:\n%s", re, s)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%q in %q: %v", m[1], re, err)
	}
	return v
}

// buildNetio builds the command into a temporary directory.
func buildNetio(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("go is not on PATH:", err)
	}
	bin := filepath.Join(t.TempDir(), "netio")
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// exitCode is the exit code of a finished command.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// closedPort is a loopback address where nothing listens: a port that was
// free a moment ago.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
