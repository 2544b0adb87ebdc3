// Command netio exercises the netio library from the shell.
//
// Usage:
//
//	netio demo [-provider name] [-mode ll|ht] [-duration d] [-json]
//	netio recv -listen host:port [-provider name] [-mode ll|ht] [-count n] [-duration d] [-json]
//	netio send -to host:port [-provider name] [-mode ll|ht] [-size bytes] [-count n] [-duration d] [-json]
//	netio pub -listen host:port -tag T [-provider name] [-mode ll|ht] [-size bytes] [-rate n] [-count n] [-duration d] [-subscribers n] [-json]
//	netio sub -to host:port -tag T[,T2...] [-provider name] [-mode ll|ht] [-policy block|drop-oldest|drop-newest] [-buffer n] [-count n] [-duration d] [-json]
//	netio pong -listen host:port [-provider name] [-count connections] [-json]
//	netio ping -to host:port [-provider name] [-size bytes] [-count n] [-duration d] [-json]
//	netio info [-provider name] [-json]
//	netio key [-file path] [-new]
//	netio version [-json]
//	netio help
//
// demo runs a listener and a client in one process over loopback and
// measures round-trip latency, small-message rate and bulk throughput, so a
// new user can see that libfabric works on the machine and what netio gets
// out of it before writing any code.
//
// recv and send measure a one-way stream between two processes, on one
// host or two: messages/s, Gbit/s and, from send times carried in the
// messages, one-way latency (which across hosts needs synchronized
// clocks). With -mode ht on both sides they use netio's HighThroughput mode
// (messages batched into pages) instead of the default low-latency one.
// ping and pong measure round trips and print their distribution.
// pub and sub are publish/subscribe: pub publishes the lines of its
// standard input (or a generated load) under a tag to every subscriber,
// sub subscribes to tags and prints each message with its tag and
// sequence number, reporting gaps and drops on stderr.
// info lists the libfabric providers netio can use here, and which of them
// netio has been tested on; version prints the versions of netio, Go and
// libfabric.
//
// Every command that connects or listens requires a key, as the library
// does: by default the key file $NETIO_KEY_FILE or ~/.config/netio/key,
// made on first use, so that two commands of one user on one host connect
// with no flag. key prints that file's path (making it if needed) and, with
// -new, writes a new key; copy the file to the hosts that must connect.
// -key-file names another file and -insecure turns keys off.
//
// Results (a table, or JSON with -json) go to stdout; progress, the
// addresses connected to and errors go to stderr. The exit code is 0 for
// success, 1 for a failed run, 2 for a command line that could not be
// understood and 130 for a run that Ctrl-C (SIGINT) ended, which prints
// what it measured up to then (143 for SIGTERM): every command stops at
// once, takes at most a second to end in order with its peer, and a second
// Ctrl-C exits at once.
package main

import (
	"fmt"
	"io"
	"os"
)

// Exit codes: 1 for a run that failed, 2 for a command line that could not
// be understood, as the flag package and most Unix tools do, and 128 plus
// the signal's number for a run a signal ended, as a shell reports a
// process that signal killed: 130 for Ctrl-C (SIGINT), 143 for SIGTERM.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitInterrupted = 130
)

const usage = `usage: netio <command> [flags]

commands:
  demo    measure latency, message rate and throughput over loopback
  recv    listen, take one sender's messages, report rate and one-way latency
  send    connect to a recv and send messages as fast as possible
          (both: -mode ht for netio's high-throughput mode)
  pub     listen for subscribers and publish stdin's lines (or a generated
          load) under a tag
  sub     subscribe to tags at a pub and print what arrives; gaps and drops
          on stderr
  pong    listen and echo every message back
  ping    measure round trips to a pong: percentiles and histogram
  info    list the libfabric providers here, the one netio picks and
          those netio is tested on
  key     print the path of the key file (made on first use); -new
          writes a new key
  version print the versions of netio, Go and libfabric
  help    show this help

Run 'netio <command> -h' for the flags of a command.

Peers need the same key: by default the file ~/.config/netio/key, which
netio makes on first use. To connect two hosts, copy it:
  ssh otherhost 'mkdir -p ~/.config/netio'
  scp -p ~/.config/netio/key otherhost:.config/netio/key

Results go to stdout, progress and errors to stderr. Exit status: 0 done,
1 failed, 2 bad command line, 130 interrupted by Ctrl-C (the summary of
what was measured is printed; a second Ctrl-C exits at once).
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process around it, so that tests can call it.
// Subcommands get their own arguments and report failures as one
// "netio: ..." line on stderr: this is a tool for people, not a place for
// stack traces.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "demo":
		return demoMain(rest, stdout, stderr)
	case "recv":
		return recvMain(rest, stdout, stderr)
	case "send":
		return sendMain(rest, stdout, stderr)
	case "pub":
		return pubMain(rest, stdout, stderr)
	case "sub":
		return subMain(rest, stdout, stderr)
	case "pong":
		return pongMain(rest, stdout, stderr)
	case "ping":
		return pingMain(rest, stdout, stderr)
	case "info":
		return infoMain(rest, stdout, stderr)
	case "key":
		return keyMain(rest, stdout, stderr)
	case "version", "-version", "--version":
		return versionMain(rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "netio: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
}
