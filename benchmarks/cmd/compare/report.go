package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netio-go/netio"
)

// point is one system at one size, run several times.
type point struct {
	Mode   string    `json:"mode"`
	Size   int       `json:"size"`
	Runs   []*Result `json:"runs"`             // successful runs
	Errors []string  `json:"errors,omitempty"` // failed runs
}

// rate summarises messages (or round trips) per second over the runs.
func (p *point) rate() summary {
	var vs []float64
	for _, r := range p.Runs {
		vs = append(vs, r.MsgRate())
	}
	return summarize(vs)
}

// gbps summarises payload Gbit/s over the runs.
func (p *point) gbps() summary {
	s := p.rate()
	k := float64(p.Size) * 8 / 1e9
	s.Median, s.Min, s.Max = s.Median*k, s.Min*k, s.Max*k
	return s
}

// latency summarises the runs' median and p99 round trips, in µs.
func (p *point) latency() (median, p99 summary) {
	var ms, ps []float64
	for _, r := range p.Runs {
		ms = append(ms, float64(r.MedianNs)/1e3)
		ps = append(ps, float64(r.P99Ns)/1e3)
	}
	return summarize(ms), summarize(ps)
}

// machine describes where the run happened.
type machine struct {
	NProc     string `json:"nproc"`
	CPU       string `json:"cpu"`
	Kernel    string `json:"kernel"`
	Libfabric string `json:"libfabric"`
	Go        string `json:"go"`
	ZeroMQ    string `json:"zeromq"`
	// CC is the compiler of the C peer (gcc --version).
	CC         string `json:"cc,omitempty"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	// Netio is the commit of the library that was measured (the
	// benchmarks module builds the working tree next to it).
	Netio string `json:"netio,omitempty"`
	// LoadBefore and LoadAfter are /proc/loadavg's 1, 5 and 15 minute
	// averages when the run started and ended: other work on the machine
	// shows there.
	LoadBefore string `json:"load_before,omitempty"`
	LoadAfter  string `json:"load_after,omitempty"`
}

// report is one whole comparison.
type report struct {
	Date    time.Time     `json:"date"`
	Machine machine       `json:"machine"`
	Command string        `json:"command"`
	Warmup  time.Duration `json:"warmup_ns"`
	Measure time.Duration `json:"measure_ns"`
	Repeat  int           `json:"repeat"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Sizes   []int         `json:"sizes"`
	Stream  []*point      `json:"stream"`
	Latency []*point      `json:"latency"`
	PubSub  []*point      `json:"pubsub,omitempty"`
	Fanout  []*point      `json:"fanout,omitempty"`
}

func (r *report) streamPoint(modeName string, size int) *point {
	for _, p := range r.Stream {
		if p.Mode == modeName && p.Size == size {
			return p
		}
	}
	return nil
}

// modesIn lists the modes of ms that have at least one point in ps, in
// the order of ms.
func modesIn(ms []*mode, ps []*point) []*mode {
	var out []*mode
	for _, m := range ms {
		for _, p := range ps {
			if p.Mode == m.name {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

// rateColumn says whether a size is shown in messages/s (small messages)
// rather than Gbit/s.
func rateColumn(size int) bool { return size <= 4<<10 }

func sizeLabel(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// fmtRate writes a message rate with three significant digits: 117k, 1.23M.
func fmtRate(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v >= 1e6:
		return trimG(v/1e6) + "M"
	case v >= 1e3:
		return trimG(v/1e3) + "k"
	}
	return trimG(v)
}

// fmtNum writes a value with three significant digits and no exponent.
func fmtNum(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return trimG(v)
}

func trimG(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	case a >= 0.1:
		return fmt.Sprintf("%.3f", v)
	case a == 0:
		return "0"
	}
	return fmt.Sprintf("%.2g", v)
}

// cell is "median (min-max)"; one run shows only the median.
func cell(s summary, f func(float64) string) string {
	switch {
	case s.N == 0:
		return "failed"
	case s.N == 1:
		return f(s.Median)
	}
	return fmt.Sprintf("%s (%s-%s)", f(s.Median), f(s.Min), f(s.Max))
}

func (r *report) streamCell(m *mode, size int) string {
	p := r.streamPoint(m.name, size)
	if p == nil {
		return ""
	}
	if rateColumn(size) {
		return cell(p.rate(), fmtRate)
	}
	return cell(p.gbps(), fmtNum)
}

// ratio is netio's median over the peer's, "0.69x".
func ratio(netio, peer summary) string {
	if netio.N == 0 || peer.N == 0 || peer.Median == 0 {
		return "-"
	}
	return fmtRatio(netio.Median / peer.Median)
}

// fmtRatio writes a ratio with at least two significant digits: 1.06x,
// 0.69x, 0.0014x.
func fmtRatio(v float64) string {
	if v >= 0.1 {
		return fmt.Sprintf("%.2fx", v)
	}
	return strconv.FormatFloat(v, 'g', 2, 64) + "x"
}

// ratioTable writes the base mode's median rate divided by each other
// mode's, size by size; the LowLatency table leaves the HighThroughput
// rows out (HT has a table of its own, which includes LL).
func (r *report) ratioTable(w func(string, ...any), baseName string, sm []*mode) {
	base := findMode(baseName)
	var peers []*mode
	for _, m := range sm {
		if m != base && !(baseName == "netio" && strings.HasPrefix(m.name, "netio-ht")) {
			peers = append(peers, m)
		}
	}
	if len(peers) == 0 || len(modesIn([]*mode{base}, r.Stream)) == 0 {
		return
	}
	short := strings.SplitN(base.label, " (", 2)[0]
	w("\n### %s's rate divided by each peer's (medians; above 1 means %s is faster)\n\n", short, short)
	w("| %s / |", short)
	for _, s := range r.Sizes {
		w(" %s |", sizeLabel(s))
	}
	w("\n|---|")
	for range r.Sizes {
		w("---|")
	}
	w("\n")
	for _, m := range peers {
		w("| %s |", m.label)
		for _, s := range r.Sizes {
			w(" %s |", r.ratioCell(baseName, m.name, s))
		}
		w("\n")
	}
}

func (r *report) ratioCell(a, b string, size int) string {
	ap, bp := r.streamPoint(a, size), r.streamPoint(b, size)
	if ap == nil || bp == nil {
		return "-"
	}
	return ratio(ap.rate(), bp.rate())
}

// target is one of the HighThroughput mode's goals: at the given sizes,
// netio HT's median rate at least min times the peer's.
type target struct {
	peer  string
	sizes func(int) bool
	what  string
	min   float64
}

var htTargets = []target{
	{"tcp-bufio", func(s int) bool { return s == 64 }, "64 B", 0.8},
	{"zmq-c", func(s int) bool { return s == 64 }, "64 B", 3},
	{"ofi", func(s int) bool { return s >= 4<<10 }, "4 KiB and up", 0.9},
}

// htRows are the netio HighThroughput rows, held to htTargets.
var htRows = []string{"netio-ht", "netio-ht-batch"}

// targets checks netio HT against its goals, at the sizes this run has.
func (r *report) targets(w func(string, ...any)) {
	var rows []string
	for _, ht := range htRows {
		rows = append(rows, r.targetRows(ht)...)
	}
	if len(rows) == 0 {
		return
	}
	w("\n### netio HT against its targets (medians of this run)\n\n| netio HT receiving with | / | target | this run | |\n|---|---|---|---|---|\n%s\n", strings.Join(rows, "\n"))
}

func (r *report) targetRows(htName string) []string {
	recv := strings.TrimSuffix(strings.SplitN(findMode(htName).label, "/ ", 2)[1], ")")
	var rows []string
	for _, t := range htTargets {
		peer := findMode(t.peer)
		var cells []string
		met, seen := true, false
		for _, s := range r.Sizes {
			ht, pp := r.streamPoint(htName, s), r.streamPoint(t.peer, s)
			if !t.sizes(s) || ht == nil || pp == nil {
				continue
			}
			a, b := ht.rate(), pp.rate()
			if a.N == 0 || b.N == 0 || b.Median == 0 {
				cells = append(cells, sizeLabel(s)+" -")
				met = false
				continue
			}
			seen = true
			v := a.Median / b.Median
			met = met && v >= t.min
			cells = append(cells, sizeLabel(s)+" "+fmtRatio(v))
		}
		if len(cells) == 0 {
			continue
		}
		verdict := "met"
		if !met || !seen {
			verdict = "**not met**"
		}
		rows = append(rows, fmt.Sprintf("| %s | %s, %s | at least %sx | %s | %s |", recv, peer.label, t.what, strconv.FormatFloat(t.min, 'g', -1, 64), strings.Join(cells, ", "), verdict))
	}
	return rows
}

// pageFill shows how full netio HT's pages were at the receiver: messages
// per page in the measured window next to what a full page holds. Pages
// the sender sealed early (its writer looked paused to the reactor) show
// up as a lower count.
func (r *report) pageFill(w func(string, ...any)) {
	var rows []string
	for _, ht := range htRows {
		var got []string
		any := false
		for _, s := range r.Sizes {
			p := r.streamPoint(ht, s)
			var vs []float64
			if p != nil {
				for _, run := range p.Runs {
					if v := run.PerPage(); v > 0 {
						vs = append(vs, v)
					}
				}
			}
			if len(vs) == 0 {
				got = append(got, "-")
			} else {
				any = true
				got = append(got, cell(summarize(vs), fmtPerPage))
			}
		}
		if any {
			rows = append(rows, fmt.Sprintf("| %s | %s |", findMode(ht).label, strings.Join(got, " | ")))
		}
	}
	if len(rows) == 0 {
		return
	}
	var full []string
	for _, s := range r.Sizes {
		full = append(full, fmtPerPage(fullPage(s)))
	}
	w("\n### netio HT: messages per page at the receiver (median of the runs, min-max)\n\n| |")
	for _, s := range r.Sizes {
		w(" %s |", sizeLabel(s))
	}
	w("\n|---|")
	for range r.Sizes {
		w("---|")
	}
	w("\n%s\n| a full page holds | %s |\n", strings.Join(rows, "\n"), strings.Join(full, " | "))
}

// prefixBytes is netio's per-message length prefix (HighThroughput mode).
const prefixBytes = 8

// fullPage is how many messages of size bytes a full page carries: whole
// records only, as a message that fits in a page never starts in the
// last one's leftover room; larger ones span pages. A page carries
// DefaultPageSize bytes of messages and one length prefix (its buffer adds
// the header), so that a message of DefaultPageSize bytes fills one page.
func fullPage(size int) float64 {
	room, rec := netio.DefaultPageSize+prefixBytes, prefixBytes+size
	if rec <= room {
		return float64(room / rec)
	}
	return float64(room) / float64(rec)
}

func fmtPerPage(v float64) string {
	if v < 10 {
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return fmtRate(v)
}

// Markdown renders the report.
func (r *report) Markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# netio next to ZeroMQ, Go's net.TCPConn and bare libfabric\n\n")
	w("- date: %s\n", r.Date.Format("2006-01-02 15:04 MST"))
	w("- machine: %s CPUs (`nproc`), %s, Linux %s; GOMAXPROCS %d\n", r.Machine.NProc, r.Machine.CPU, r.Machine.Kernel, r.Machine.GOMAXPROCS)
	if r.Machine.LoadBefore != "" {
		w("- load average (1, 5, 15 min): %s at the start, %s at the end; the runs themselves keep about 2 busy\n", r.Machine.LoadBefore, r.Machine.LoadAfter)
	}
	if r.Machine.Netio != "" {
		w("- netio: %s\n", r.Machine.Netio)
	}
	providers := "provider `tcp`, loopback"
	for _, p := range r.allPoints() {
		if m := findMode(p.Mode); m != nil && m.provider == "shm" {
			providers = "provider `tcp` on loopback, `shm` for the rows on shm"
			break
		}
	}
	w("- software: libfabric %s (%s), %s, libzmq %s through github.com/pebbe/zmq4", r.Machine.Libfabric, providers, r.Machine.Go, r.Machine.ZeroMQ)
	if r.Machine.CC != "" {
		w(" and from C (%s, `%s`)", r.Machine.CC, strings.Join(cFlags, " "))
	}
	w("\n")
	w("- command: %s (took %s)\n", r.Command, r.Elapsed.Round(time.Second))
	w("- method: every run is a fresh sender process and a fresh receiver process on 127.0.0.1; the rate is timed at the receiver over %v after a %v warm-up that is not counted (both start at the first message); payload bytes only (no headers or length prefixes); each point is run %s (all systems of one size taking turns, so that a slow spell of this shared machine does not fall on one point alone), cells show the median and, in brackets, the min-max of the runs. Every message carries a sequence number that the receiver checks, so every row is lossless and in order.\n\n",
		r.Measure, r.Warmup, times(r.Repeat))

	// The opt-in rows, when a run has them, go under the default ones.
	sm := modesIn(append(slices.Clone(streamModes), optInModes...), r.Stream)
	if len(sm) > 0 {
		w("## One-way stream\n\nMessages/s up to 4 KiB, payload Gbit/s from 64 KiB.\n\n")
		w("| system |")
		for _, s := range r.Sizes {
			unit := "Gbit/s"
			if rateColumn(s) {
				unit = "msg/s"
			}
			w(" %s (%s) |", sizeLabel(s), unit)
		}
		w("\n|---|")
		for range r.Sizes {
			w("---|")
		}
		w("\n")
		for _, m := range sm {
			w("| %s |", m.label)
			for _, s := range r.Sizes {
				w(" %s |", r.streamCell(m, s))
			}
			w("\n")
		}
		for _, base := range []string{"netio", "netio-ht"} {
			r.ratioTable(w, base, sm)
		}
		r.targets(w)
		r.pageFill(w)
	}

	lm := modesIn(latencyModes, r.Latency)
	if len(lm) > 0 {
		w("\n## Round trip, 64 B\n\nPer-iteration latency at the client (send, then wait for the echo) over the measured window; median of the runs' medians and of their p99s, min-max of the runs in brackets.\n\n")
		w("| system | median µs | p99 µs | round trips/s | netio's median ÷ this (below 1: netio is faster) |\n|---|---|---|---|---|\n")
		var netioMed summary
		for _, p := range r.Latency {
			if p.Mode == "rtt-netio" {
				netioMed, _ = p.latency()
			}
		}
		for _, m := range lm {
			for _, p := range r.Latency {
				if p.Mode != m.name {
					continue
				}
				med, p99 := p.latency()
				rel := "-"
				if netioMed.N > 0 && med.N > 0 {
					rel = fmtRatio(netioMed.Median / med.Median)
				}
				w("| %s | %s | %s | %s | %s |\n", m.label, cell(med, fmtNum), cell(p99, fmtNum), cell(p.rate(), fmtRate), rel)
			}
		}
	}

	r.goalTable(w)
	r.pubsubTable(w)
	r.fanoutTable(w)

	var errs []string
	for _, p := range r.allPoints() {
		for _, e := range p.Errors {
			errs = append(errs, fmt.Sprintf("- %s %s: %s", p.Mode, sizeLabel(p.Size), oneLine(e)))
		}
	}
	if len(errs) > 0 {
		w("\n## Failed runs\n\n%s\n", strings.Join(errs, "\n"))
	}
	w("\n## How each row is measured\n\n")
	if len(r.Stream) > 0 || len(r.Latency) > 0 {
		w("%s", methodNotes)
	}
	if len(r.PubSub) > 0 || len(r.Fanout) > 0 {
		w("%s", pubsubNotes)
	}
	if len(r.Fanout) > 0 {
		w("%s", fanoutNotes)
	}
	return b.String()
}

// allPoints are the report's points, every table's.
func (r *report) allPoints() []*point {
	return slices.Concat(r.Stream, r.Latency, r.PubSub, r.Fanout)
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

var methodNotes = `- **netio LL**: ` + "`netio.Dial`/`Listen`" + ` with default options (` + sizeLabel(netio.DefaultBufferSize) + ` buffers, window ` + strconv.Itoa(netio.DefaultWindow) + `: messages queued behind sends in flight are packed into one buffer, larger ones span buffers); one ` + "`Write`" + ` per message (from 256 KiB sent from the sender's slice, not copied in, on ` + "`tcp`" + `), one ` + "`ReadMessage`" + ` per message into a reused buffer.
- **netio HT**: ` + "`netio.WithMode(netio.HighThroughput)`" + ` on both sides, otherwise default options (pages of ` + sizeLabel(netio.DefaultPageSize) + `, ` + strconv.Itoa(netio.DefaultPages) + ` of them, flush when full, on a pause of the writer or after ` + netio.DefaultFlushInterval.String() + `); one ` + "`Write`" + ` per message, which copies it behind an 8-byte length into the open page; the receiver takes each message with ` + "`NextMessage`" + ` (no copy out of the page), checks it and calls ` + "`Release`" + `. Like the bufio sender, the sender is killed at the end, so no final flush or ` + "`Close`" + ` is counted.
- **ZeroMQ PUSH/PULL**: ` + "`SendBytes`/`RecvBytes`" + ` (pebbe/zmq4 copies each received message into a new Go slice: that is its API), one I/O thread. SNDHWM = RCVHWM = 1000 messages (ZeroMQ's default) but at most 32 MiB of messages per socket (512 at 64 KiB, 32 at 1 MiB); PUSH blocks at the mark.
- **netio HT (WriteBatch / NextBatch)**: the batch calls on both sides: the sender writes ` + strconv.Itoa(htBatch) + ` messages per ` + "`WriteBatch`" + ` (one pass through the send gate for all of them), the receiver takes up to ` + strconv.Itoa(htBatch) + ` messages at a time with ` + "`NextBatch`" + ` (those already at hand, under one lock; valid until the next read, nothing to release).
- **ZeroMQ PUSH/PULL (C)**: ` + "`csrc/zmq_thr.c`" + `, built by the run with gcc and ` + "`-lzmq`" + `, written as libzmq's own ` + "`local_thr`/`remote_thr`" + ` are: the sender ` + "`zmq_send`" + `s from one buffer (libzmq copies it into a message), the receiver reuses one ` + "`zmq_msg_t`" + ` with ` + "`zmq_msg_recv`" + ` (no copy out) and checks the sequence number; same HWMs and timing as the Go rows (a timer thread flips the phase, the loop reads it after every message). This is the "ZeroMQ from C" bar without cgo and pebbe/zmq4's copies.
- **ZeroMQ XPUB/SUB**: XPUB_NODROP=1 and the same HWMs, so a send at the mark waits instead of dropping; the publisher starts after the subscription has arrived, and the subscriber's sequence check proves nothing was lost.
- **Go net.TCPConn**: one ` + "`Write`" + ` of an 8-byte length prefix plus the payload per message; the receiver reads prefix and payload with ` + "`io.ReadFull`" + ` straight from the connection. **+ 1 MiB bufio**: the same frames through a 1 MiB ` + "`bufio.Writer`" + ` (it goes out when full; the run ends by the sender being killed, so no final flush is counted) and read through a 1 MiB ` + "`bufio.Reader`" + `. Go's default TCP_NODELAY.
- **bare libfabric**: netio's ` + "`ofi`" + ` binding without netio: FI_EP_MSG on ` + "`tcp`" + `, each process busy-polls its own CQ. The receiver posts W buffers (64, at most 16 MiB: 16 at 1 MiB), sends W in the accept's private data, re-posts buffers in batches and returns the count of re-posted buffers in an 8-byte credit message every W/2; the sender posts sends in batches and never has more than credit + W sent, so it never sends to a peer without a posted buffer.
- **netio on shm**: the netio LL and HT rows unchanged but for the network: ` + "`netio.Listen(\"shm\", \"\")`" + ` in the receiver, which prints its listener's address (` + "`fi_shm://<pid>:...`" + `), and ` + "`netio.Dial(\"shm\", thatAddress)`" + ` in the sender: libfabric's shared-memory provider, reliable-datagram endpoints, the two processes on one host. The round-trip row is the netio one on shm. **bare libfabric on shm**: package ofi's RDM layer without netio (tagged messages on an FI_EP_RDM endpoint, each process busy-polling its own queue): the receiver prints its endpoint's address, the sender inserts it in its address vector and sends its own address first; the stream keeps the bare tcp row's window and credits (the window known to both sides; credits and messages within the inject size sent injected), the round trip echoes each 64 B message. A run where libfabric has no shm provider skips these rows and says so.
- **Round trips**: netio with the echo server in a goroutine (` + "`ReadMessage`+`Write`" + `) and in ` + "`OnMessage`" + ` on the reactor; ZeroMQ REQ/REP; Go TCP blocking reads with the same 8-byte prefix; bare libfabric with both sides busy-polling.
- Every sender writes every byte of its buffers once before sending, so nobody sends from untouched zero pages.
`
