package main

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"os"
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

// durRE matches a duration as the tables print it: 45 µs, 1.23 ms, 850 ns.
const durRE = `[0-9.]+ (?:ns|µs|ms|s)`

// durField finds re in s and returns its first group, a duration as the
// tables print it.
func durField(t *testing.T, s string, re string) time.Duration {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no %q in:\n%s", re, s)
	}
	return parseDur(t, m[1])
}

// parseDur parses a duration as the tables print it.
func parseDur(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return d
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

// binProc is a command running in a process of its own.
type binProc struct {
	argv   []string
	cmd    *exec.Cmd
	stdout bytes.Buffer
	mu     sync.Mutex
	stderr bytes.Buffer
	lines  chan string // stderr, a line at a time
	done   chan struct{}
	err    error
}

// startBin starts argv; the test's end kills it if it is still running.
func startBin(t *testing.T, argv ...string) *binProc {
	t.Helper()
	return startBinIn(t, nil, argv...)
}

// startBinIn is startBin with stdin as the command's standard input (nil:
// none).
func startBinIn(t *testing.T, stdin *os.File, argv ...string) *binProc {
	t.Helper()
	p := &binProc{argv: argv, lines: make(chan string, 1000), done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	if stdin != nil {
		p.cmd.Stdin = stdin
	}
	p.cmd.Stdout = &p.stdout
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		close(p.lines)
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *binProc) String() string { return strings.Join(p.argv, " ") }

func (p *binProc) errText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// waitLine waits for a line of stderr matching re and returns its groups.
func (p *binProc) waitLine(t *testing.T, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	timeout := time.After(runTimeout)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				<-p.done
				t.Fatalf("%s ended (%v) without printing %q; stderr:\n%s", p, p.err, re, p.errText())
			}
			if m := rx.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-timeout:
			t.Fatalf("%s did not print %q within %v; stderr:\n%s", p, re, runTimeout, p.errText())
		}
	}
}

// mustExit waits for the process and checks its exit code.
func (p *binProc) mustExit(t *testing.T, want int) {
	t.Helper()
	p.mustExitWithin(t, want, runTimeout)
}

// mustExitWithin is mustExit giving up after timeout, a bound generous
// enough for a loaded machine: what a test checks is that the command
// ends, not how fast.
func (p *binProc) mustExitWithin(t *testing.T, want int, timeout time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s did not end within %v; stderr:\n%s", p, timeout, p.errText())
	}
	if code := exitCode(t, p.err); code != want {
		t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", p, code, want, p.stdout.String(), p.errText())
	}
}

// syncBuffer is a bytes.Buffer that a goroutine may write while the test
// reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
