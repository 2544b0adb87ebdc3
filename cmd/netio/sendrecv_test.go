package main

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

func decode(t *testing.T, s string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("not the JSON summary: %v\n%s", err, s)
	}
}

func TestSendRecv(t *testing.T) {
	recv := start("recv", "-listen", "127.0.0.1:0")
	send := start("send", "-to", recv.addr(t), "-count", "2000", "-size", "1024")
	send.mustExit(t, exitOK)
	recv.mustExit(t, exitOK)

	r := recv.stdout.String()
	if n := field(t, r, `(?m)^received +([0-9]+) messages \(1\.95 MiB\)`); n != 2000 {
		t.Errorf("received %v messages, want 2000:\n%s", n, r)
	}
	if v := field(t, r, `(?m)^rate +([0-9.]+) msg/s`); v <= 0 {
		t.Errorf("rate %v:\n%s", v, r)
	}
	if v := field(t, r, `(?m)^rate +[0-9.]+ msg/s, ([0-9.]+) Gbit/s`); v <= 0 {
		t.Errorf("Gbit/s %v:\n%s", v, r)
	}
	med := durField(t, r, `(?m)^latency +median (`+durRE+`)`)
	p99 := durField(t, r, `(?m)^latency +median `+durRE+`, p99 (`+durRE+`) \(one-way, 2000 messages; one host, one clock\)`)
	if med <= 0 || p99 < med {
		t.Errorf("latency median %v, p99 %v:\n%s", med, p99, r)
	}
	if !strings.Contains(r, "ended     the sender ended the stream") {
		t.Errorf("recv did not see the end of the stream:\n%s", r)
	}
	if !strings.Contains(recv.stderr.String(), "sender 127.0.0.1:") {
		t.Errorf("recv stderr:\n%s", recv.stderr)
	}

	s := send.stdout.String()
	if n := field(t, s, `(?m)^sent +([0-9]+) messages of 1024 B`); n != 2000 {
		t.Errorf("sent %v messages, want 2000:\n%s", n, s)
	}
	if v := field(t, s, `(?m)^rate +([0-9.]+) msg/s`); v <= 0 {
		t.Errorf("rate %v:\n%s", v, s)
	}
	if !strings.Contains(s, "\nended     count reached\nreceiver  confirmed: it counted all 2000 messages\n") {
		t.Errorf("send summary:\n%s", s)
	}
	if !strings.HasPrefix(send.stderr.String(), "connected to 127.0.0.1:") {
		t.Errorf("send stderr:\n%s", send.stderr)
	}
}

// The receiver stops first: it asks the sender to stop, and both end in
// order with the receiver's count exact.
func TestSendRecvJSON(t *testing.T) {
	recv := start("recv", "-listen", "127.0.0.1:0", "-count", "300", "-json")
	send := start("send", "-to", recv.addr(t), "-size", "64KiB", "-json")
	send.mustExit(t, exitOK)
	recv.mustExit(t, exitOK)

	var r recvResult
	decode(t, recv.stdout.String(), &r)
	if r.Messages != 300 || r.Bytes != 300<<16 || r.Seconds <= 0 || r.MessagesPerSecond <= 0 || r.GbitPerSecond <= 0 {
		t.Errorf("recv %+v: want 300 messages of 64 KiB and positive rates", r)
	}
	if r.Ended != "count reached" || r.Provider != "tcp" || r.Local == "" || r.Remote == "" {
		t.Errorf("recv %+v", r)
	}
	if l := r.Latency; l == nil || l.Samples != 300 || l.MinMicros <= 0 || l.MedianMicros < l.MinMicros || l.P99Micros < l.MedianMicros || l.MaxMicros < l.P99Micros {
		t.Errorf("latency %+v: want 300 ordered positive samples", l)
	}
	var s sendResult
	decode(t, send.stdout.String(), &s)
	if s.Messages < 300 || s.Bytes != s.Messages<<16 || !s.Timestamped || s.Ended != "the receiver asked to stop" {
		t.Errorf("send %+v: want at least 300 messages, stopped by the receiver", s)
	}
	// The receiver counted 300 and read the rest without counting them:
	// every message arrived, but "confirmed" only if all were counted.
	if s.ReceiverCounted == nil || *s.ReceiverCounted != 300 || s.ReceiverRead == nil || *s.ReceiverRead != s.Messages ||
		s.Confirmed != (s.Messages == 300) || r.Dropped != s.Messages-300 {
		t.Errorf("send %+v (receiver counted %v, read %v), recv dropped %d: want the receiver's count acknowledged", s, s.ReceiverCounted, s.ReceiverRead, r.Dropped)
	}
	if r.Mode != "low-latency" || s.Mode != "low-latency" || s.Flushes != nil {
		t.Errorf("modes %q and %q, flushes %+v: want low-latency by default", r.Mode, s.Mode, s.Flushes)
	}
	// In LowLatency mode the libfabric messages are counted as fragments,
	// not pages: at least one per receive buffer's worth of messages
	// (messages queued behind sends in flight share one).
	if r.Pages != nil || s.Pages != nil || r.Fragments == nil || s.Fragments == nil ||
		*r.Fragments*netio.DefaultBufferSize < uint64(r.Bytes) || *s.Fragments*netio.DefaultBufferSize < uint64(s.Bytes) {
		t.Errorf("recv pages %v fragments %v, send pages %v fragments %v: want fragments only, one per %d bytes at least", r.Pages, r.Fragments, s.Pages, s.Fragments, netio.DefaultBufferSize)
	}
	if s.Local != r.Remote || s.Remote != r.Local {
		t.Errorf("send %s -> %s, recv %s <- %s", s.Local, s.Remote, r.Local, r.Remote)
	}
}

// -mode ht on both sides: messages travel in pages, and the protocol's
// control messages (end of stream, echo, stop request) are flushed.
func TestSendRecvHT(t *testing.T) {
	recv := start("recv", "-listen", "127.0.0.1:0", "-mode", "ht", "-json")
	addr := recv.addr(t)

	// A sender in the other mode is refused, and says why.
	ll := start("send", "-to", addr, "-count", "10")
	ll.mustExit(t, exitError)
	if e := ll.stderr.String(); !strings.Contains(e, "the listener does not use low-latency mode") {
		t.Errorf("a low-latency sender to a high-throughput receiver: stderr %q", e)
	}

	send := start("send", "-to", addr, "-mode", "ht", "-count", "20000", "-size", "64", "-json")
	send.mustExit(t, exitOK)
	recv.mustExit(t, exitOK)
	var r recvResult
	decode(t, recv.stdout.String(), &r)
	var s sendResult
	decode(t, send.stdout.String(), &s)
	if r.Mode != "high-throughput" || s.Mode != "high-throughput" {
		t.Errorf("modes %q and %q", r.Mode, s.Mode)
	}
	if r.Messages != 20000 || r.Bytes != 64*20000 || r.MessagesPerSecond <= 0 || r.GbitPerSecond <= 0 || r.Ended != "the sender ended the stream" {
		t.Errorf("recv %+v: want 20000 messages of 64 B, ended by the sender", r)
	}
	// 20000 messages of 64 B need two pages at least; every pause of the
	// writer sends one more, and how often a loaded machine pauses it is
	// not netio's to decide (the root package's TestBufferedFullPages
	// checks that pages go out full, BenchmarkBuffered reports the share
	// of pages a pause sent, idle-flush-%).
	if r.Pages == nil || s.Pages == nil || r.Fragments != nil || s.Fragments != nil {
		t.Fatalf("recv pages %v fragments %v, send pages %v fragments %v: want pages only", r.Pages, r.Fragments, s.Pages, s.Fragments)
	}
	if *r.Pages < 2 || *s.Pages < *r.Pages {
		t.Errorf("recv %d pages, send %d: want messages in pages, every page sent received", *r.Pages, *s.Pages)
	}
	if l := r.Latency; l == nil || l.Samples != 20000 {
		t.Errorf("latency %+v: want 20000 samples", l)
	}
	f := s.Flushes
	if s.Messages != 20000 || !s.Confirmed || f == nil || f.Full+f.Paused+f.Explicit+f.Timer != *s.Pages || f.Explicit < 1 {
		t.Errorf("send %+v, flushes %+v: want 20000 messages confirmed, pages counted by cause, the end of the stream flushed", s, f)
	}
}

// In HT mode too the receiver can stop first: its stop request is flushed
// at once, and the table shows the pages.
func TestSendRecvHTReceiverStops(t *testing.T) {
	recv := start("recv", "-listen", "127.0.0.1:0", "-mode", "ht", "-count", "300")
	send := start("send", "-to", recv.addr(t), "-mode", "ht", "-size", "4KiB")
	send.mustExit(t, exitOK)
	recv.mustExit(t, exitOK)
	r, snd := recv.stdout.String(), send.stdout.String()
	if n := field(t, r, `(?m)^received +([0-9]+) messages`); n != 300 {
		t.Errorf("received %v messages, want 300:\n%s", n, r)
	}
	if !strings.HasPrefix(r, "netio recv: provider tcp, high-throughput mode, ") || field(t, r, `(?m)^pages +([0-9]+) received, [0-9.]+ messages per page on average$`) < 1 {
		t.Errorf("recv table:\n%s", r)
	}
	if !regexp.MustCompile(`(?m)^ended +the receiver asked to stop\nreceiver +(confirmed: it counted all 300 messages|counted 300 of the [0-9]+ messages: it stopped first and dropped the other [0-9]+)$`).MatchString(snd) ||
		field(t, snd, `(?m)^pages +([0-9]+) sent, [0-9.]+ messages per page on average; sent when full [0-9]+, writer paused [0-9]+, Flush [0-9]+, timer [0-9]+$`) < 1 {
		t.Errorf("send table:\n%s", snd)
	}
}

// Messages under 16 bytes carry no send time; -duration ends the receiver.
func TestSendRecvSmallDuration(t *testing.T) {
	recv := start("recv", "-listen", "127.0.0.1:0", "-duration", "300ms", "-json")
	send := start("send", "-to", recv.addr(t), "-size", "8", "-json")
	send.mustExit(t, exitOK)
	recv.mustExit(t, exitOK)
	var r recvResult
	decode(t, recv.stdout.String(), &r)
	var s sendResult
	decode(t, send.stdout.String(), &s)
	if r.Messages <= 0 || r.Bytes != 8*r.Messages || r.Latency != nil || r.Ended != "duration reached" {
		t.Errorf("recv %+v: want messages of 8 bytes without latency, ended by -duration", r)
	}
	if s.Messages < r.Messages || s.Timestamped || s.ReceiverCounted == nil || *s.ReceiverCounted != r.Messages || *s.ReceiverRead != s.Messages {
		t.Errorf("send %+v, recv %d messages: want the receiver's count acknowledged", s, r.Messages)
	}
}

// Any netio program may send to recv: it stops at io.EOF.
func TestRecvPlainSender(t *testing.T) {
	recv := start("recv", "-listen", "127.0.0.1:0", "-json")
	c, err := netio.Dial("", recv.addr(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if _, err := c.Write([]byte("not a timestamp, just text")); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	recv.mustExit(t, exitOK)
	var r recvResult
	decode(t, recv.stdout.String(), &r)
	if r.Messages != 100 || r.Latency != nil || r.Ended != "the sender closed the connection" {
		t.Errorf("recv %+v: want 100 messages without latency, ended by the close", r)
	}
}

func TestSendUnreachable(t *testing.T) {
	addr := closedPort(t)
	send := start("send", "-to", addr, "-count", "10")
	send.mustExit(t, exitError)
	if e := send.stderr.String(); e != "netio: send: dial tcp "+addr+": connection refused\n" {
		t.Errorf("stderr %q: want one line saying the connection was refused", e)
	}
	if send.stdout.String() != "" {
		t.Errorf("stdout %q", send.stdout)
	}
}

// A peer that stops reading ends a blocked Write once it has made no
// progress for the guard's limit; a writer that progresses is left alone.
func TestGuardProgress(t *testing.T) {
	ln, err := netio.Listen("", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *netio.Conn, 1)
	go func() {
		c, _ := ln.AcceptConn()
		accepted <- c // and never read from it
	}()
	c, err := netio.Dial("", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if peer := <-accepted; peer != nil {
		defer peer.Close()
	}
	// A backstop: a guard that never fires lets Close end the Write.
	backstop := time.AfterFunc(runTimeout, func() { c.Close() })
	defer backstop.Stop()
	const limit = 300 * time.Millisecond
	var n atomic.Int64
	last := time.Now() // of the last progress, before n shows it
	stop := guardProgress(c, n.Load, limit)
	defer stop()
	msg := make([]byte, 64<<10)
	for {
		if _, err := c.Write(msg); err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("write: %v, want a deadline exceeded (the guard's, not the backstop's Close after %v)", err, runTimeout)
			}
			break
		}
		last = time.Now()
		n.Add(1)
	}
	// Not before the limit; how much later depends on the guard's ticks
	// and on the machine.
	if el := time.Since(last); el < limit {
		t.Errorf("the guard ended the write %v after the last progress, want at least %v", el, limit)
	}
}
