// Command compare measures netio next to what a Go user would pick instead
// (ZeroMQ through pebbe/zmq4, Go's net.TCPConn with and without bufio) and
// next to bare libfabric through netio's ofi binding, on loopback, with
// sender and receiver in separate processes: the binary re-executes itself
// once per side of every run. It writes results/compare.md (tables),
// results/compare.svg (throughput against message size, log-log) and
// results/compare.json (every run).
//
//	go run ./cmd/compare          # the full comparison, about 5 minutes
//	go run ./cmd/compare -quick   # fewer sizes, shorter points, one repeat: about a minute
//
// The ZeroMQ PUSH/PULL row from C is csrc/zmq_thr.c, which the run builds
// with gcc -O2 and -lzmq into a temporary directory.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/netio-go/netio/ofi"
	zmq "github.com/pebbe/zmq4"
)

var fullSizes = []int{8, 64, 256, 1 << 10, 4 << 10, 64 << 10, 1 << 20}

// quickSizes are -quick's: those the HighThroughput targets name (64 B
// and 4 KiB up) and the ends of the range.
var quickSizes = []int{8, 64, 4 << 10, 64 << 10, 1 << 20}

func sizeList(sizes []int) string {
	var s []string
	for _, n := range sizes {
		s = append(s, sizeLabel(n))
	}
	return strings.Join(s, ", ")
}

// plan is what one invocation measures.
type plan struct {
	sizes           []int
	streamModes     []*mode
	latencyModes    []*mode
	pubsubModes     []*mode
	fanoutModes     []*mode
	repeat          int
	warmup, measure time.Duration
	out             string // directory for the results; "" writes none
}

func main() {
	if os.Getenv(childEnv) == "1" {
		childMain()
	}
	os.Exit(parentMain(os.Args[1:]))
}

func parentMain(args []string) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "fewer sizes ("+sizeList(quickSizes)+"), 0.2 s + 0.5 s points, one repeat; results in results/quick")
	sizes := fs.String("sizes", "", "comma-separated message sizes in bytes (default: 8 B to 1 MiB)")
	modes := fs.String("modes", "", "comma-separated modes to run (default: all but the opt-in ones); stream: "+modeNames(streamModes)+"; opt-in stream: "+modeNames(optInModes)+"; round trip: "+modeNames(latencyModes)+"; publish/subscribe (64 B and 4 KiB, whatever -sizes says): "+modeNames(pubsubModes)+", or pubsub for all of them; fan-out (64 B): "+modeNames(fanoutModes)+", or fanout for all of them; a run of publish/subscribe modes alone writes pubsub.{md,json} instead of compare.*, of fan-out modes alone fanout.{md,json}")
	repeat := fs.Int("repeat", 0, "runs per point (default 3, quick 1)")
	warmup := fs.Duration("warmup", 0, "uncounted warm-up per run (default 300ms, quick 200ms)")
	measure := fs.Duration("measure", 0, "measured time per run (default 1s, quick 500ms)")
	out := fs.String("out", "", "directory for compare.md, .svg and .json (default results, quick results/quick)")
	from := fs.String("from", "", "measure nothing: render compare.md and .svg again from this compare.json (into -out, default its directory)")
	png := fs.Bool("png", false, "also write compare.png")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *from != "" {
		dir := *out
		if dir == "" {
			dir = filepath.Dir(*from)
		}
		if err := rerender(*from, dir, *png); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			return 1
		}
		return 0
	}
	p := plan{sizes: fullSizes, streamModes: streamModes, latencyModes: latencyModes, pubsubModes: pubsubModes,
		fanoutModes: fanoutModes, repeat: 3, warmup: 300 * time.Millisecond, measure: time.Second, out: "results"}
	if *quick {
		p.sizes = quickSizes
		p.repeat, p.warmup, p.measure, p.out = 1, 200*time.Millisecond, 500*time.Millisecond, filepath.Join("results", "quick")
	}
	if *sizes != "" {
		p.sizes = nil
		for _, f := range strings.Split(*sizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 8 {
				fmt.Fprintf(os.Stderr, "compare: bad size %q (at least 8 bytes)\n", f)
				return 2
			}
			p.sizes = append(p.sizes, n)
		}
	}
	if *modes != "" {
		p.streamModes, p.latencyModes, p.pubsubModes, p.fanoutModes = nil, nil, nil, nil
		for _, f := range strings.Split(*modes, ",") {
			switch strings.TrimSpace(f) {
			case "pubsub":
				p.pubsubModes = append(p.pubsubModes, pubsubModes...)
				continue
			case "fanout":
				p.fanoutModes = append(p.fanoutModes, fanoutModes...)
				continue
			}
			m := findMode(strings.TrimSpace(f))
			if m == nil {
				fmt.Fprintf(os.Stderr, "compare: unknown mode %q\n", f)
				return 2
			}
			if m.fanout {
				p.fanoutModes = append(p.fanoutModes, m)
			} else if m.subs > 0 {
				p.pubsubModes = append(p.pubsubModes, m)
			} else if m.latency {
				p.latencyModes = append(p.latencyModes, m)
			} else {
				p.streamModes = append(p.streamModes, m)
			}
		}
	}
	p.streamModes = skipAbsent(p.streamModes, os.Stderr)
	p.latencyModes = skipAbsent(p.latencyModes, os.Stderr)
	if *repeat > 0 {
		p.repeat = *repeat
	}
	if *warmup > 0 {
		p.warmup = *warmup
	}
	if *measure > 0 {
		p.measure = *measure
	}
	if *out != "" {
		p.out = *out
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		return 1
	}
	cmd := "make compare` (= `cd benchmarks && go run ./cmd/compare`)"
	if len(args) > 0 {
		cmd = "cd benchmarks && go run ./cmd/compare " + strings.Join(args, " ") + "`"
	}
	cmd = "`" + cmd
	r := &runner{exe: exe, warmup: p.warmup, measure: p.measure}
	if needsCPeer(p.streamModes) {
		path, remove, err := buildCPeer()
		if err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			r.cPeerErr = err
		} else {
			defer remove()
			r.cPeer = path
		}
	}
	rep := execute(r, p, cmd, os.Stdout)
	if p.out != "" {
		if err := rep.write(p.out, *png); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			return 1
		}
		files := ".{md,svg,json}"
		if len(rep.Stream) == 0 {
			files = ".{md,json}"
		}
		fmt.Printf("wrote %s in %s\n", filepath.Join(p.out, rep.baseName()+files), rep.Elapsed.Round(time.Second))
	}
	for _, pt := range rep.allPoints() {
		if len(pt.Runs) == 0 {
			return 1
		}
	}
	return 0
}

// skipAbsent drops the modes whose libfabric provider this machine lacks,
// saying so on w, so that a run without shm still measures the rest.
func skipAbsent(ms []*mode, w io.Writer) []*mode {
	var kept []*mode
	for _, m := range ms {
		if m.provider != "" {
			if err := providerPresent(m.provider); err != nil {
				fmt.Fprintf(w, "compare: skipping %s: %v\n", m.name, err)
				continue
			}
		}
		kept = append(kept, m)
	}
	return kept
}

// providerPresent asks libfabric for reliable-datagram endpoints on
// provider, as netio's Listen does.
func providerPresent(provider string) error {
	l, err := ofi.GetRDMInfo(ofi.RDMHints{Provider: provider})
	if err != nil {
		if errors.Is(err, ofi.ENODATA) {
			return fmt.Errorf("libfabric %s has no %s provider here (%w)", ofi.LibraryVersion(), provider, err)
		}
		return err
	}
	l.Free()
	return nil
}

func modeNames(ms []*mode) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.name)
	}
	return strings.Join(s, ", ")
}

// execute runs the plan, printing one line per point to progress.
func execute(r *runner, p plan, command string, progress io.Writer) *report {
	start := time.Now()
	rep := &report{Date: start, Machine: describeMachine(), Command: command,
		Warmup: p.warmup, Measure: p.measure, Repeat: p.repeat, Sizes: p.sizes}
	total := len(p.sizes)*len(p.streamModes) + len(p.latencyModes) + len(pubsubSizes)*len(p.pubsubModes) + len(p.fanoutModes)
	done := 0
	report := func(m *mode, pt *point, took time.Duration) {
		done++
		line := fmt.Sprintf("[%2d/%d] %-20s %7s  ", done, total, m.name, sizeLabel(pt.Size))
		switch {
		case len(pt.Runs) == 0:
			line += "FAILED: " + oneLine(pt.Errors[0])
		case m.fanout:
			line += fmt.Sprintf("%s deliveries/s in total, %s per subscriber (1 -> %d)", cell(pt.total(), fmtRate), cell(pt.rate(), fmtRate), m.subs)
		case m.subs > 0:
			line += fmt.Sprintf("%s msg/s per subscriber (1 -> %d)", cell(pt.rate(), fmtRate), m.subs)
		case m.latency:
			med, p99 := pt.latency()
			line += fmt.Sprintf("round trip median %s µs, p99 %s µs", cell(med, fmtNum), cell(p99, fmtNum))
		default:
			line += fmt.Sprintf("%s msg/s  %s Gbit/s", cell(pt.rate(), fmtRate), cell(pt.gbps(), fmtNum))
		}
		if len(pt.Runs) > 0 && len(pt.Errors) > 0 {
			line += fmt.Sprintf("  (%d runs failed: %s)", len(pt.Errors), oneLine(pt.Errors[0]))
		}
		fmt.Fprintf(progress, "%s  [%.1fs]\n", line, took.Seconds())
	}
	// measure runs a group of points (one size, every system) repeat times,
	// the systems taking turns, so that a slow spell of a shared machine is
	// spread over all of them instead of falling on one point's every run.
	measure := func(ms []*mode, size int) []*point {
		pts := make([]*point, len(ms))
		took := make([]time.Duration, len(ms))
		for i, m := range ms {
			pts[i] = &point{Mode: m.name, Size: size}
		}
		for range p.repeat {
			for i, m := range ms {
				t := time.Now()
				res, err := r.run(m, size)
				took[i] += time.Since(t)
				if err != nil {
					pts[i].Errors = append(pts[i].Errors, err.Error())
					continue
				}
				pts[i].Runs = append(pts[i].Runs, res)
			}
		}
		for i, m := range ms {
			report(m, pts[i], took[i])
		}
		return pts
	}
	for _, size := range p.sizes {
		rep.Stream = append(rep.Stream, measure(p.streamModes, size)...)
	}
	if len(p.latencyModes) > 0 {
		rep.Latency = measure(p.latencyModes, 64)
	}
	if len(p.pubsubModes) > 0 {
		for _, size := range pubsubSizes {
			rep.PubSub = append(rep.PubSub, measure(p.pubsubModes, size)...)
		}
	}
	if len(p.fanoutModes) > 0 {
		rep.Fanout = measure(p.fanoutModes, fanoutSize)
	}
	rep.Elapsed = time.Since(start)
	rep.Machine.LoadAfter = loadAverage()
	return rep
}

func rerender(from, dir string, png bool) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	rep := new(report)
	if err := json.Unmarshal(b, rep); err != nil {
		return err
	}
	return rep.write(dir, png)
}

func (rep *report) write(dir string, png bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, rep.baseName()+".md"), []byte(rep.Markdown()), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, rep.baseName()+".json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if len(rep.Stream) == 0 {
		return nil
	}
	if png {
		if err := rep.SavePlot(filepath.Join(dir, "compare.png")); err != nil {
			return err
		}
	}
	return rep.SavePlot(filepath.Join(dir, "compare.svg"))
}

func describeMachine() machine {
	m := machine{NProc: strconv.Itoa(runtime.NumCPU()), CPU: "unknown", Kernel: "unknown",
		Libfabric: ofi.LibraryVersion().String(), Go: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	if out, err := exec.Command("nproc").Output(); err == nil {
		m.NProc = strings.TrimSpace(string(out))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	// fi_info (libfabric-bin) knows the patch level; the library only major.minor.
	if out, err := exec.Command("fi_info", "--version").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "libfabric:"); ok {
				m.Libfabric = strings.TrimSpace(v)
			}
		}
	}
	m.LoadBefore = loadAverage()
	m.Netio = netioCommit()
	a, b, c := zmq.Version()
	m.ZeroMQ = fmt.Sprintf("%d.%d.%d", a, b, c)
	m.CC = ccVersion()
	return m
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// netioCommit names the library's commit, and says so when the library's
// files (outside benchmarks/ and the commands in cmd/) differ from it.
func netioCommit() string {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return ""
	}
	dir := strings.TrimSpace(string(top))
	head, err := exec.Command("git", "-C", dir, "log", "-1", "--format=%h (%cs)").Output()
	if err != nil {
		return ""
	}
	s := "commit " + strings.TrimSpace(string(head))
	dirty, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)benchmarks", ":(exclude)cmd").Output()
	if err == nil && len(strings.TrimSpace(string(dirty))) > 0 {
		s += " plus uncommitted changes to the working tree"
	}
	return s
}

// baseName is the name of the report's files: compare, pubsub for a
// run of the publish/subscribe rows alone, fanout for one of the fan-out
// rows alone (neither must overwrite a full run's compare.md).
func (rep *report) baseName() string {
	if len(rep.Stream) == 0 && len(rep.Latency) == 0 {
		switch {
		case len(rep.PubSub) > 0:
			return "pubsub"
		case len(rep.Fanout) > 0:
			return "fanout"
		}
	}
	return "compare"
}
