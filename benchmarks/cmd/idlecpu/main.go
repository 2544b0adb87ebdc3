// Command idlecpu measures what an idle netio connection costs and how
// long the first message after a quiet spell takes (docs/rdm.md, "An idle
// shm process").
//
//	go run ./cmd/idlecpu -network shm            # a listener process and a dialer process
//	go run ./cmd/idlecpu -network shm -inproc    # one process holding both ends
//
// After 100 round trips and a rest, each process reads its CPU time
// (getrusage, user + system) over the idle spell; then the first round
// trip after each of -samples quiet spells of -quiet is timed, beside
// round trips in a row.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/netio-go/netio"
)

var (
	network = flag.String("network", "shm", "the provider")
	inproc  = flag.Bool("inproc", false, "both ends in this process")
	rest    = flag.Duration("rest", time.Second, "the rest before the idle spell")
	idle    = flag.Duration("idle", 10*time.Second, "the idle spell measured")
	quiet   = flag.Duration("quiet", time.Second, "the quiet spell before each timed round trip")
	samples = flag.Int("samples", 10, "round trips after a quiet spell")
	child   = flag.String("child", "", "internal: the listener's address, for the dialer process")
)

func main() {
	flag.Parse()
	var err error
	switch {
	case *child != "":
		err = dialer(*child)
	default:
		err = listener()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "idlecpu:", err)
		os.Exit(1)
	}
}

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// idleCPU is the CPU time this process spends over the rest and the idle
// spell, counted over the idle spell only.
func idleCPU() time.Duration {
	time.Sleep(*rest)
	before := cpu()
	time.Sleep(*idle)
	return cpu() - before
}

// echo answers every message until the connection ends; asked "idle", it
// measures its own process (a dialer process) and answers with the figure.
func echo(c *netio.Conn, measure bool) error {
	buf := make([]byte, 256)
	for {
		n, err := c.ReadMessage(buf)
		if err != nil {
			return nil
		}
		if measure && string(buf[:n]) == "idle" {
			d := idleCPU()
			n = copy(buf, fmt.Sprint(int64(d)))
		}
		if _, err := c.Write(buf[:n]); err != nil {
			return err
		}
	}
}

func dialer(addr string) error {
	c, err := netio.Dial(*network, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return echo(c, true)
}

func listener() error {
	ln, err := netio.Listen(*network, listenAddr())
	if err != nil {
		return err
	}
	defer ln.Close()
	var peer *exec.Cmd
	if *inproc {
		go func() {
			c, err := netio.Dial(*network, ln.Addr().String())
			if err == nil {
				echo(c, false)
				c.Close()
			}
		}()
	} else {
		peer = exec.Command(os.Args[0], append(os.Args[1:], "-child", ln.Addr().String())...)
		peer.Stdout, peer.Stderr = os.Stdout, os.Stderr
		if err := peer.Start(); err != nil {
			return err
		}
		defer peer.Wait()
		defer peer.Process.Kill()
	}
	c, err := ln.AcceptConn()
	if err != nil {
		return err
	}
	defer c.Close()
	msg, buf := make([]byte, 64), make([]byte, 256)
	rtt := func(p []byte) (time.Duration, []byte, error) {
		t0 := time.Now()
		if _, err := c.Write(p); err != nil {
			return 0, nil, err
		}
		n, err := c.ReadMessage(buf)
		return time.Since(t0), buf[:n], err
	}
	for range 100 {
		if _, _, err := rtt(msg); err != nil {
			return err
		}
	}

	fmt.Printf("%s, %s: idle CPU over %v after a %v rest\n", *network, map[bool]string{true: "one process", false: "two processes"}[*inproc], *idle, *rest)
	peerCPU := make(chan string, 1)
	if peer != nil {
		go func() {
			// The dialer measures itself meanwhile; its answer comes
			// after the spell.
			_, got, err := rtt([]byte("idle"))
			if err != nil {
				got = []byte(err.Error())
			}
			peerCPU <- string(got)
		}()
	}
	own := idleCPU()
	fmt.Printf("  this process: %v (%.2f%%)\n", own.Round(time.Microsecond), 100*float64(own)/float64(*idle))
	if peer != nil {
		var ns int64
		s := <-peerCPU
		if _, err := fmt.Sscan(s, &ns); err != nil {
			return fmt.Errorf("the dialer's figure: %q", s)
		}
		d := time.Duration(ns)
		fmt.Printf("  the dialer:   %v (%.2f%%)\n", d.Round(time.Microsecond), 100*float64(d)/float64(*idle))
	}

	var after, warm []time.Duration
	for range *samples {
		time.Sleep(*quiet)
		d, _, err := rtt(msg)
		if err != nil {
			return err
		}
		after = append(after, d)
		for range 5 {
			d, _, err := rtt(msg)
			if err != nil {
				return err
			}
			warm = append(warm, d)
		}
	}
	fmt.Printf("  first round trip after %v quiet: %s\n", *quiet, summary(after))
	fmt.Printf("  round trips in a row:             %s\n", summary(warm))
	return nil
}

func listenAddr() string {
	if *network == "shm" {
		return ""
	}
	return "127.0.0.1:0"
}

func summary(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	parts := []string{"median " + s[len(s)/2].Round(time.Microsecond).String(), "min " + s[0].Round(time.Microsecond).String(),
		"max " + s[len(s)-1].Round(time.Microsecond).String()}
	return strings.Join(parts, ", ") + fmt.Sprintf(" (%d)", len(s))
}
