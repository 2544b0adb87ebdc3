//go:build hosts

package hosts_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/netio-go/netio/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// hangTimeout bounds every wait of these tests. It guards against a hang
// and measures nothing: what a test waits for takes milliseconds to
// seconds (a heartbeat timeout, a reconnection) on an idle machine.
const hangTimeout = 60 * time.Second

// nsPrefix starts the name of every namespace these tests make, followed
// by the test process's pid: namespaces left by a test binary that was
// killed are found by it and removed by the next run.
const nsPrefix = "netio-"

// netns is a network namespace: a host of its own, with only lo until
// connect joins it to another.
type netns struct{ name string }

var (
	nsSeq       atomic.Int32
	removeStale sync.Once
)

// newNetns makes a namespace, removed at the end of the test (after the
// processes in it, which the test started later, are killed). It skips the
// test where namespaces cannot be made.
func newNetns(t *testing.T, role string) *netns {
	t.Helper()
	switch {
	case runtime.GOOS != "linux":
		t.Skip("multi-host tests need Linux network namespaces")
	case os.Geteuid() != 0:
		t.Skip("multi-host tests need root to make network namespaces (run make test-hosts as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("multi-host tests need ip (iproute2) to make network namespaces")
	}
	removeStale.Do(removeStaleNamespaces)
	n := &netns{name: fmt.Sprintf("%s%d-%d-%s", nsPrefix, os.Getpid(), nsSeq.Add(1), role)}
	if out, err := exec.Command("ip", "netns", "add", n.name).CombinedOutput(); err != nil {
		t.Skipf("cannot make a network namespace: ip netns add: %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", n.name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", n.name, err, out)
		}
	})
	n.ip(t, "link", "set", "lo", "up")
	return n
}

// removeStaleNamespaces deletes the namespaces of test processes that are
// gone: a run killed before its clean-up leaves them behind.
func removeStaleNamespaces() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, nsPrefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			exec.Command("ip", "netns", "del", name).Run()
		}
	}
}

// ip runs ip with args inside n.
func (n *netns) ip(t *testing.T, args ...string) {
	t.Helper()
	run(t, "ip", append([]string{"-n", n.name}, args...)...)
}

// exec runs a command inside n.
func (n *netns) exec(t *testing.T, name string, args ...string) {
	t.Helper()
	run(t, "ip", append([]string{"netns", "exec", n.name, name}, args...)...)
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// connect joins a and b with a veth pair: devA in a with address addrA,
// devB in b with addrB, both in one /24. The pair goes when either
// namespace does.
func connect(t *testing.T, a *netns, devA, addrA string, b *netns, devB, addrB string) {
	t.Helper()
	if out, err := exec.Command("ip", "-n", a.name, "link", "add", devA, "type", "veth", "peer", "name", devB, "netns", b.name).CombinedOutput(); err != nil {
		t.Skipf("cannot make a veth pair: %v: %s", err, strings.TrimSpace(string(out)))
	}
	a.ip(t, "addr", "add", addrA+"/24", "dev", devA)
	b.ip(t, "addr", "add", addrB+"/24", "dev", devB)
	a.ip(t, "link", "set", devA, "up")
	b.ip(t, "link", "set", devB, "up")
}

// impair makes dev in n lose 1% of the packets it sends, and delay them by
// 20 ms, with tc netem. A kernel without netem (sch_netem) cannot delay:
// the loss is then made with iptables' statistic match on what n
// receives, if iptables is there. It returns what it did, or skips.
func impair(t *testing.T, n *netns, dev string) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", n.name, "tc", "qdisc", "add", "dev", dev, "root", "netem", "delay", "20ms", "loss", "1%").CombinedOutput()
	if err == nil {
		t.Cleanup(func() { logDrops(t, n, "tc", "-s", "qdisc", "show", "dev", dev) })
		return "tc netem delay 20ms loss 1%"
	}
	why := strings.TrimSpace(string(out))
	if why == "" {
		why = err.Error()
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skipf("cannot impair the link: no tc netem (%s) and no iptables", why)
	}
	n.exec(t, "iptables", "-A", "INPUT", "-i", dev, "-m", "statistic", "--mode", "random", "--probability", "0.01", "-j", "DROP")
	t.Cleanup(func() { logDrops(t, n, "iptables", "-L", "INPUT", "-v", "-n", "-x") })
	return "iptables loss 1%, no delay (tc netem: " + why + ")"
}

// logDrops logs the lines of a command's output run in n that count
// dropped packets: the impairment did its work (a veth passes segments of
// up to 64 KiB, so even a short test drops some).
func logDrops(t *testing.T, n *netns, name string, args ...string) {
	out, _ := exec.Command("ip", append([]string{"netns", "exec", n.name, name}, args...)...).CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "DROP") || strings.Contains(line, "dropped") {
			t.Logf("%s: %s", n.name, strings.Join(strings.Fields(line), " "))
		}
	}
}

// roleEnv names the role a child process plays; the others say what it
// needs.
const (
	roleEnv = "NETIO_HOSTS_ROLE"
	addrEnv = "NETIO_HOSTS_ADDR" // where to listen or what to dial
	modeEnv = "NETIO_HOSTS_MODE" // ll or ht
)

// child is a test process started in a namespace: it takes commands on
// its stdin, one a line, answers on stdout, and exits when stdin closes.
type child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// startChild runs this test binary's TestHostsChild in n as role, with
// env added. It is killed at the end of the test.
func startChild(t *testing.T, n *netns, role string, env ...string) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", n.name, exe, "-test.run=^TestHostsChild$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), roleEnv+"="+role), env...)
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
	c := &child{name: role + " in " + n.name, cmd: cmd, stdin: stdin, lines: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return c
}

// send writes a command line to the child.
func (c *child) send(t *testing.T, command string) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, command+"\n"); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
}

// waitFor returns the child's next line that starts with prefix.
func (c *child) waitFor(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.NewTimer(hangTimeout)
	defer timeout.Stop()
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("%s exited before a line starting %q", c.name, prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout.C:
			t.Fatalf("no line starting %q from %s within %v", prefix, c.name, hangTimeout)
		}
	}
}

// ask sends command and scans the answer, the next line starting with
// prefix, into args.
func (c *child) ask(t *testing.T, command, prefix string, args ...any) {
	t.Helper()
	c.send(t, command)
	line := c.waitFor(t, prefix)
	if _, err := fmt.Sscan(strings.TrimPrefix(line, prefix), args...); err != nil {
		t.Fatalf("%s answered %q: %v", c.name, line, err)
	}
}

// eventually polls cond until it holds, failing the test after
// hangTimeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(hangTimeout); !cond(); time.Sleep(20 * time.Millisecond) { // polling pace
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, hangTimeout)
		}
	}
}

// childFatal ends a child with an error its parent sees on stderr.
func childFatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "netio hosts child %s: %s\n", os.Getenv(roleEnv), fmt.Sprintf(format, args...))
	os.Exit(3)
}

// commands reads the parent's commands, one a line, and closes the
// channel when the parent goes (stdin closes).
func commands() <-chan string {
	ch := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			ch <- strings.TrimSpace(sc.Text())
		}
		close(ch)
	}()
	return ch
}
