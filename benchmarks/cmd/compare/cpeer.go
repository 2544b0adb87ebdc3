package main

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// zmqThrSource is the ZeroMQ PUSH/PULL peer in C, in the binary so that
// the harness builds it wherever it runs (tests included).
//
//go:embed csrc/zmq_thr.c
var zmqThrSource []byte

// cFlags are how the C peer is built, as libzmq's own perf tools would be
// with an optimising build.
var cFlags = []string{"-O2", "-Wall"}

// buildCPeer compiles the C peer into a new temporary directory with gcc
// and libzmq; remove deletes the directory.
func buildCPeer() (path string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "netio-compare-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	src, exe := filepath.Join(dir, "zmq_thr.c"), filepath.Join(dir, "zmq_thr")
	if err := os.WriteFile(src, zmqThrSource, 0o644); err != nil {
		remove()
		return "", nil, err
	}
	args := append(append([]string(nil), cFlags...), "-o", exe, src, "-lzmq", "-lpthread")
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		remove()
		return "", nil, fmt.Errorf("building the C peer (gcc %s): %v: %s (make compare installs libzmq3-dev)", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return exe, remove, nil
}

// ccVersion is gcc's first line of --version, for the report.
func ccVersion() string {
	out, err := exec.Command("gcc", "--version").Output()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

// needsCPeer reports whether any of ms runs the C peer.
func needsCPeer(ms []*mode) bool {
	for _, m := range ms {
		if m.cArgs != nil {
			return true
		}
	}
	return false
}
