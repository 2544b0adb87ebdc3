package netio_test

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netio-go/netio"
)

// An idle shm pair's reactor sleeps until a descriptor is ready, not on
// the blind sources' timer: once asleep, heartbeats (here every 20 ms)
// wake it again and again, and no sleep of it is a timed one.
func TestRDMShmIdleSleepsOnDoorbell(t *testing.T) {
	const beats = 5
	c, s, _ := rdmPair(t, "shm", "", netio.WithHeartbeatInterval(20*time.Millisecond))
	echo(t, c, s, []byte("a small message"))
	// One past the inject size: its send completes only once the peer
	// has taken it, and the sender polls on the timer until then.
	echo(t, c, s, make([]byte, 64<<10))
	echo(t, c, s, []byte("then silence"))
	eventually(t, "the reactor asleep after the echoes", reactorAsleep)
	before := netio.ReactorStats()
	eventually(t, "heartbeats waking the reactor", func() bool {
		return netio.ReactorStats().Wakeups >= before.Wakeups+beats
	})
	after := netio.ReactorStats()
	if timed := after.TimedSleeps - before.TimedSleeps; timed != 0 {
		t.Errorf("an idle shm pair slept %d times on the timer in %d wake-ups", timed, after.Wakeups-before.Wakeups)
	}
}

// A message to an shm peer whose reactor sleeps with no timer to come
// back on (heartbeats an hour apart, the check for silence off, the
// blind sources' timer an hour long) arrives: the sender rings the
// peer's doorbell. The peer is another process, so nothing of this one
// wakes its reactor. Messages past the inject size too (their sends
// complete only once the peer has taken them); then a stream of them,
// echoed.
func TestRDMShmMessageWakesSleepingPeer(t *testing.T) {
	opts := []netio.Option{netio.WithHeartbeatInterval(time.Hour), netio.WithHeartbeatTimeout(-1)}
	sizes := []int{9, 64 << 10, 1 << 20}
	const stream = 600
	if os.Getenv(childEnv) == "dial-sleep" {
		netio.SetIdlePoll(time.Hour) // no timer to come back on
		c, err := netio.Dial("shm", os.Getenv(childAddrEnv), opts...)
		if err != nil {
			childFatal("Dial: %v", err)
		}
		for i := 0; ; i++ {
			got := make(chan error, 1)
			var m []byte
			go func() {
				var err error
				m, err = c.AppendMessage(nil)
				got <- err
			}()
			if i < len(sizes) {
				// Asleep: the reader parked, then the reactor.
				deadline := time.Now().Add(hangTimeout)
				for netio.ReaderParks() <= uint64(i) || !reactorAsleep() {
					if time.Now().After(deadline) {
						childFatal("the reader or the reactor never slept: %+v", netio.ReactorStats())
					}
					time.Sleep(time.Millisecond) // polling pace, as eventually (the child has no testing.T)
				}
				os.Stdout.WriteString("ASLEEP\n")
			}
			if err := <-got; err != nil {
				childBlock()
			}
			if _, err := c.Write(m); err != nil {
				childFatal("Write: %v", err)
			}
		}
	}
	ln := rdmListen(t, "shm", "", opts...)
	_, out := startChild(t, "TestRDMShmMessageWakesSleepingPeer", "dial-sleep", ln.Addr().String())
	s := acceptOne(t, ln, hangTimeout)
	defer s.Close()
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	for i, size := range sizes {
		line, err := out.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "ASLEEP" {
			t.Fatalf("the child: %q, %v", line, err)
		}
		msg := bytes.Repeat([]byte{byte('a' + i)}, size)
		if _, err := s.Write(msg); err != nil {
			t.Fatal(err)
		}
		s.SetReadDeadline(time.Now().Add(hangTimeout))
		got, err := s.AppendMessage(nil)
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("echo %d (%d bytes) from the sleeping child: %d bytes, %v", i, size, len(got), err)
		}
	}
	msg := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, []int{1, 5000, 70000}[i%3]) }
	go func() {
		for i := range stream {
			if _, err := s.Write(msg(i)); err != nil {
				return
			}
		}
	}()
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	for i := range stream {
		got, err := s.AppendMessage(nil)
		if err != nil || !bytes.Equal(got, msg(i)) {
			t.Fatalf("streamed echo %d: %d bytes, %v", i, len(got), err)
		}
	}
}

// A local process that rings an endpoint's doorbell without end only
// keeps its reactor awake: messages go on, and once the ringing stops
// the reactor sleeps again.
func TestRDMShmHostileRinger(t *testing.T) {
	c, s, ln := rdmPair(t, "shm", "")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.CloseOnExec(fd) // the flag after the call: this file builds for GOOS=darwin too
	defer unix.Close(fd)
	to := &unix.SockaddrUnix{Name: netio.DoorbellName(ln.Addr().String())}
	big := make([]byte, 60000)
	if err := unix.Sendto(fd, big, 0, to); err != nil {
		t.Fatalf("ringing the listener's doorbell %q: %v", to.Name, err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			unix.Sendto(fd, big[:i%len(big)], unix.MSG_DONTWAIT, to)
		}
	}()
	for i := range 200 {
		echo(t, c, s, []byte{byte(i), 1, 2, 3})
	}
	close(stop)
	wg.Wait()
	echo(t, c, s, []byte("after the ringing"))
	eventually(t, "the reactor asleep once the ringing stopped", reactorAsleep)
}

// The same where shm cannot copy between processes directly (no CMA, as
// in containers without ptrace rights): its segmented protocol (SAR)
// moves a large message in pieces, each side's progress waiting for the
// other's, which only the rings of a sender with sends out keep going.
func TestRDMShmMessageWakesSleepingPeerSAR(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRDMShmMessageWakesSleepingPeer$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "FI_SHM_DISABLE_CMA=1")
	out, err := cmd.CombinedOutput()
	if err == nil && strings.Contains(string(out), "--- SKIP: TestRDMShmMessageWakesSleepingPeer") {
		t.Skipf("the test it runs skipped:\n%s", out) // no shm, or NETIO_PROFILE
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: TestRDMShmMessageWakesSleepingPeer") {
		t.Fatalf("with FI_SHM_DISABLE_CMA=1: %v\n%s", err, out)
	}
}
