// Command netio exercises the netio library from the shell.
//
// Usage:
//
//	netio demo [-provider name] [-duration d] [-json]
//	netio help
//
// demo runs a listener and a client in one process over loopback and
// measures round-trip latency, small-message rate and bulk throughput, so a
// new user can see that libfabric works on the machine and what netio gets
// out of it before writing any code.
package main

import (
	"fmt"
	"io"
	"os"
)

// Exit codes: 1 for a run that failed, 2 for a command line that could not
// be understood, as the flag package and most Unix tools do.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

const usage = `usage: netio <command> [flags]

commands:
  demo    measure latency, message rate and throughput over loopback
  help    show this help

Run 'netio <command> -h' for the flags of a command.
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
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "netio: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
}
