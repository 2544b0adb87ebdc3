package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// childEnv marks a process started by the parent to play one role; the
// test binary looks at it too, so that the tests can run real points.
const childEnv = "NETIO_COMPARE_CHILD"

// childArgs are the flags of a child process.
type childArgs struct {
	Role    string // "server" or "client"
	Mode    string
	Size    int
	Addr    string // the server's address (client only)
	Warmup  time.Duration
	Measure time.Duration
	Subs    int // publish/subscribe: the number of subscribers
}

func (a *childArgs) flags() []string {
	return []string{"-role=" + a.Role, "-mode=" + a.Mode, fmt.Sprintf("-size=%d", a.Size),
		"-addr=" + a.Addr, "-warmup=" + a.Warmup.String(), "-measure=" + a.Measure.String(), fmt.Sprintf("-subs=%d", a.Subs)}
}

func parseChildArgs(args []string) (*childArgs, error) {
	a := &childArgs{}
	fs := flag.NewFlagSet("compare child", flag.ContinueOnError)
	fs.StringVar(&a.Role, "role", "", "server or client")
	fs.StringVar(&a.Mode, "mode", "", "what to run")
	fs.IntVar(&a.Size, "size", 64, "payload bytes per message")
	fs.StringVar(&a.Addr, "addr", "", "the server's address")
	fs.DurationVar(&a.Warmup, "warmup", 300*time.Millisecond, "uncounted time after the first message")
	fs.DurationVar(&a.Measure, "measure", time.Second, "measured time")
	fs.IntVar(&a.Subs, "subs", 0, "publish/subscribe: the number of subscribers")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if a.Size < 8 {
		return nil, errors.New("size below 8 bytes: messages carry a sequence number")
	}
	return a, nil
}

// runChild plays one role. The server first prints "ADDR <address>"; the
// side that times prints "RESULT <json>". Both lines go to out.
func runChild(args []string, out io.Writer) error {
	a, err := parseChildArgs(args)
	if err != nil {
		return err
	}
	m := findMode(a.Mode)
	if m == nil {
		return fmt.Errorf("unknown mode %q", a.Mode)
	}
	var r *Result
	switch a.Role {
	case "server":
		r, err = m.server(a, func(addr string) { fmt.Fprintf(out, "ADDR %s\n", addr) })
	case "client":
		r, err = m.client(a)
	default:
		return fmt.Errorf("unknown role %q", a.Role)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", a.Mode, a.Role, err)
	}
	if r != nil {
		b, _ := json.Marshal(r)
		fmt.Fprintf(out, "RESULT %s\n", b)
	}
	return nil
}

// childMain is main for a child process; it does not return.
func childMain() {
	if err := runChild(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}
