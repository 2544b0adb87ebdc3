package netio_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/ofi"
)

// Bad input from the network against HighThroughput connections, from the
// raw peer of rawpeer_test.go speaking the page format by hand (page.go):
// a 16-byte header of kind 4 whose msgLen counts the bytes at the start of
// the payload that continue the previous page's last message, then
// records, each an 8-byte little-endian length and that many bytes.

// readUntilError reads s until an error, with NextMessage or ReadMessage,
// and returns the messages read before it.
func readUntilError(s *netio.Conn, next bool) (msgs []string, err error) {
	buf := make([]byte, 64<<10)
	for {
		if next {
			m, err := s.NextMessage()
			if err != nil {
				return msgs, err
			}
			msgs = append(msgs, string(m.Bytes()))
			m.Release()
			continue
		}
		n, err := s.ReadMessage(buf)
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, string(buf[:n]))
	}
}

// TestBufferedBadPeerPages connects hand-made peers to a HighThroughput
// Listener (and one LowLatency Listener) and sends pages that break the
// page format. The accepted Conn must read what came before the bad page
// and then fail with ErrProtocol (ErrMessageTooLarge for a length above
// the maximum) in a *net.OpError within 2 s, and the Listener and its
// other connections must carry on.
func TestBufferedBadPeerPages(t *testing.T) {
	const maxMsg = 1000
	hi, ll := netio.HighThroughput, netio.LowLatency
	type page = []byte
	type badPages struct {
		name   string
		mode   netio.Mode
		pages  []page   // sent in order after a valid "ok" message
		before []string // read before the error
		want   error
	}
	cases := []badPages{
		{"length says more, next page starts new records", hi, []page{
			rawPage(0, rawRecord(100, make([]byte, 10))),
			rawPage(0, rawRecords("next")),
		}, nil, netio.ErrProtocol},
		{"length says more, next page continues more than is left", hi, []page{
			rawPage(0, rawRecord(100, make([]byte, 10))),
			rawPage(100, make([]byte, 120)),
		}, nil, netio.ErrProtocol},
		{"length says more, next page continues less than is left", hi, []page{
			rawPage(0, rawRecord(100, make([]byte, 10))),
			rawPage(50, make([]byte, 60)),
		}, nil, netio.ErrProtocol},
		{"length says more, next page empty", hi, []page{
			rawPage(0, rawRecord(100, make([]byte, 10))),
			rawPage(0, nil),
		}, nil, netio.ErrProtocol},
		{"length says less", hi, []page{
			rawPage(0, append(rawRecord(2, []byte("ab")), "cdef"...)),
		}, []string{"ab"}, netio.ErrProtocol},
		{"length above the maximum", hi, []page{
			rawPage(0, append(rawRecords("fine"), rawRecord(maxMsg+1, make([]byte, 10))...)),
		}, []string{"fine"}, netio.ErrMessageTooLarge},
		{"length far above the maximum", hi, []page{
			rawPage(0, rawRecord(1<<63, make([]byte, 10))),
		}, nil, netio.ErrMessageTooLarge},
		{"length above the maximum in a later page", hi, []page{
			rawPage(0, rawRecord(600, make([]byte, 500))),
			rawPage(100, append(make([]byte, 100), rawRecord(maxMsg+1, nil)...)),
		}, []string{string(make([]byte, 600))}, netio.ErrMessageTooLarge},
		{"continuation count on a first page", hi, []page{
			rawPage(5, append([]byte("abcde"), rawRecords("x")...)),
		}, nil, netio.ErrProtocol},
		{"continuation count after a whole message, records follow", hi, []page{
			rawPage(0, rawRecords("whole")),
			rawPage(8, rawRecords("a", "b")),
		}, []string{"whole"}, netio.ErrProtocol},
		{"continuation count after a whole message", hi, []page{
			rawPage(0, rawRecords("whole")),
			rawPage(3, append([]byte("abc"), rawRecords("x")...)),
		}, []string{"whole"}, netio.ErrProtocol},
		{"msgLen above fragLen", hi, []page{
			append(wHeader{kind: wKindPage, fragLen: 5, msgLen: 10}.bytes(), "abcde"...),
		}, nil, netio.ErrProtocol},
		{"fragLen says more than arrived", hi, []page{
			append(wHeader{kind: wKindPage, fragLen: 100}.bytes(), rawRecords("short")...),
		}, nil, netio.ErrProtocol},
		{"fragLen says less than arrived", hi, []page{
			append(wHeader{kind: wKindPage, fragLen: 5}.bytes(), rawRecords("longer")...),
		}, nil, netio.ErrProtocol},
		{"fragment of protocol level 2", hi, []page{
			append(wHeader{kind: wKindData, flags: wFlagLast, fragLen: 3, msgLen: 3}.bytes(), "zzz"...),
		}, nil, netio.ErrProtocol},
		{"page after FIN", hi, []page{
			wHeader{kind: wKindFin, flags: wFlagLast}.bytes(),
			rawPage(0, rawRecords("zombie")),
		}, nil, netio.ErrProtocol},
		{"page larger than the receive buffer", hi, []page{
			rawPage(0, rawRecord(7000, make([]byte, 7000))),
		}, nil, netio.ErrProtocol},
		{"fragment of protocol level 2 on a low-latency connection", ll, []page{
			append(wHeader{kind: wKindData, flags: wFlagLast, fragLen: 3, msgLen: 3}.bytes(), "zzz"...),
		}, nil, netio.ErrProtocol},
	}
	for k := 1; k < 8; k++ {
		cases = append(cases, badPages{"page ends with " + strconv.Itoa(k) + " bytes of a length", hi, []page{
			rawPage(0, append(rawRecords("x"), make([]byte, k)...)),
		}, []string{"x"}, netio.ErrProtocol})
	}

	listen := func(opts ...netio.Option) *netio.Listener {
		opts = append(opts, netio.WithMaxMessageSize(maxMsg), netio.WithBufferSize(4096), netio.WithWindow(8))
		ln, err := netio.Listen("tcp", "127.0.0.1:0", opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln
	}
	type side struct {
		ln           *netio.Listener
		opts         []netio.Option
		goodC, goodS *netio.Conn
	}
	sides := map[netio.Mode]*side{
		netio.HighThroughput: {ln: listen(ht), opts: []netio.Option{ht}},
		netio.LowLatency:     {ln: listen()},
	}
	for _, sd := range sides {
		sd.goodC, sd.goodS = dialAccept(t, sd.ln, sd.opts...)
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sd, mode := sides[tc.mode], tc.mode
			p, err := dialRaw(t, sd.ln.Addr().String(), modeHello(mode, rawWindow, rawBufSize, 1<<20))
			if err != nil {
				t.Fatalf("raw peer with a valid %v handshake was refused: %v", mode, err)
			}
			defer p.close()
			if len(p.accept) < 24 || string(p.accept[:4]) != "NTIO" || p.accept[5] != byte(mode) {
				t.Fatalf("listener's accept data %q is not a %v netio handshake", p.accept, mode)
			}
			s := acceptOne(t, sd.ln, hangTimeout)
			next := i%2 == 1 // NextMessage on every other case, ReadMessage on the others

			// A valid message first: proves the fake peer speaks the
			// protocol, so the failure below is due to the bad input.
			if mode == netio.HighThroughput {
				p.send(rawPage(0, rawRecords("ok")))
			} else {
				p.send(dataMsg([]byte("ok")))
			}
			type res struct {
				msgs []string
				err  error
			}
			rc := make(chan res, 1)
			done := make(chan struct{})
			go func() {
				defer close(done)
				buf := make([]byte, 64)
				n, err := s.ReadMessage(buf)
				rc <- res{[]string{string(buf[:n])}, err}
			}()
			if !p.pumpUntil(done, hangTimeout) {
				s.Close()
				<-done
				t.Fatal("the valid message before the bad one never arrived")
			}
			if r := <-rc; r.err != nil || r.msgs[0] != "ok" {
				t.Fatalf("valid message: %q, %v", r.msgs, r.err)
			}

			for _, pg := range tc.pages {
				p.send(pg)
			}
			start := time.Now()
			done = make(chan struct{})
			go func() {
				defer close(done)
				msgs, err := readUntilError(s, next)
				rc <- res{msgs, err}
			}()
			if !p.pumpUntil(done, hangTimeout) {
				s.Close()
				<-done
				t.Fatalf("after %s, reading the accepted Conn still blocked %v later; want an error wrapping %v", tc.name, hangTimeout, tc.want)
			}
			r := <-rc
			if !errors.Is(r.err, tc.want) {
				t.Fatalf("after %s, reading returned %d messages and %v; want an error wrapping %q", tc.name, len(r.msgs), r.err, tc.want)
			}
			var oe *net.OpError
			if !errors.As(r.err, &oe) {
				t.Errorf("error %v is a %T, want a *net.OpError", r.err, r.err)
			}
			if len(r.msgs) != len(tc.before) {
				t.Errorf("read %d messages before the error, want %d", len(r.msgs), len(tc.before))
			}
			for j := range min(len(r.msgs), len(tc.before)) {
				if r.msgs[j] != tc.before[j] {
					t.Errorf("message %d before the error: %q, want %q", j, trunc([]byte(r.msgs[j])), trunc([]byte(tc.before[j])))
				}
			}
			t.Logf("%v after %v (NextMessage %v)", r.err, time.Since(start).Round(time.Microsecond), next)
			// Every later read returns the error too.
			if _, err := s.NextMessage(); !errors.Is(err, tc.want) {
				t.Errorf("NextMessage after %v: %v", r.err, err)
			}
			if _, err := s.ReadMessage(make([]byte, 64)); !errors.Is(err, tc.want) {
				t.Errorf("ReadMessage after %v: %v", r.err, err)
			}
			// The connection is dead: writing fails. When the reader found
			// the violation, the reactor learns of it just after.
			eventually(t, fmt.Sprintf("Write failing on a connection closed for %v", r.err), func() bool {
				_, err := s.Write([]byte("x"))
				return err != nil
			})
			if err := s.Close(); err != nil {
				t.Errorf("Close after a protocol violation: %v", err)
			}
			// The peer is told: the endpoint is closed and it sees a shutdown.
			eventually(t, "the misbehaving peer disconnected after Close", func() bool {
				p.poll()
				return p.shutdown
			})

			// Everything else carries on.
			echo(t, sd.goodC, sd.goodS, []byte("still here after "+tc.name))
			c2, s2 := dialAccept(t, sd.ln, sd.opts...)
			echo(t, c2, s2, []byte("new connection #"+strconv.Itoa(i)))
		})
	}
}

// TestBufferedRawPages sends well-formed pages by hand, records of every
// kind and a message split over two pages, and checks that a
// HighThroughput Conn reads them as sent; and that the page it writes back
// is laid out the same way: the raw encoding of these tests is netio's.
// The Conn has no pause watch and a flush interval longer than the test, so
// that its page goes out at Flush, holding both records, however long the
// machine takes between the two Writes.
func TestBufferedRawPages(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0", ht, netio.WithBufferSize(rawBufSize), netio.WithWindow(8),
		netio.WithNoIdleFlush(), netio.WithFlushInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p, err := dialRaw(t, ln.Addr().String(), modeHello(netio.HighThroughput, rawWindow, rawBufSize, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	s := acceptOne(t, ln, hangTimeout)

	big := make([]byte, 5000)
	for i := range big {
		big[i] = byte(i * 7)
	}
	first := rawRecords("a", "", "hello")
	first = append(first, rawRecord(uint64(len(big)), nil)...)
	inFirst := rawBufSize - 16 - len(first) // the page is exactly one receive buffer
	first = append(first, big[:inFirst]...)
	pages := [][]byte{
		rawPage(0, first),
		rawPage(uint64(len(big)-inFirst), append(append([]byte(nil), big[inFirst:]...), rawRecords("end")...)),
		rawPage(0, nil), // an empty page between messages is allowed
		rawPage(0, rawRecords("", "last")),
	}
	if len(pages[0]) != rawBufSize {
		t.Fatalf("first page is %d bytes, want %d", len(pages[0]), rawBufSize)
	}
	want := []string{"a", "", "hello", string(big), "end", "", "last"}
	for _, pg := range pages {
		p.send(pg)
	}
	type res struct {
		msgs []string
		err  error
	}
	rc := make(chan res, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.SetReadDeadline(time.Now().Add(hangTimeout))
		defer s.SetReadDeadline(time.Time{})
		var msgs []string
		for i := range want {
			var b []byte
			var err error
			switch i % 3 {
			case 0:
				var m netio.Message
				if m, err = s.NextMessage(); err == nil {
					b = bytes.Clone(m.Bytes())
					m.Release()
				}
			case 1:
				b, err = s.AppendMessage(nil)
			case 2:
				buf := make([]byte, 8000)
				var n int
				n, err = s.ReadMessage(buf)
				b = buf[:n]
			}
			if err != nil {
				rc <- res{msgs, err}
				return
			}
			msgs = append(msgs, string(b))
		}
		rc <- res{msgs, nil}
	}()
	if !p.pumpUntil(done, hangTimeout) {
		s.Close()
		<-done
		t.Fatalf("the raw pages were not read within %v", hangTimeout)
	}
	r := <-rc
	if r.err != nil {
		t.Fatalf("after %d messages: %v", len(r.msgs), r.err)
	}
	for i, m := range r.msgs {
		if m != want[i] {
			t.Fatalf("message %d: %d bytes %q, want %d bytes %q", i, len(m), trunc([]byte(m)), len(want[i]), trunc([]byte(want[i])))
		}
	}
	if st := s.Stats(); st.MessagesReceived != uint64(len(want)) || st.PagesReceived != uint64(len(pages)) {
		t.Errorf("stats %+v: want %d messages in %d pages", st, len(want), len(pages))
	}

	// The other way: what the Conn writes arrives as one page holding
	// both records, in the raw peer's receive buffer.
	if _, err := s.Write([]byte("reply")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	got := recvRawKind(t, p, wKindPage, hangTimeout)
	wantPage := rawPage(0, rawRecords("reply", ""))
	if got[0] != wKindPage {
		t.Fatalf("page from the Conn: %x\nwant kind %d", got, wKindPage)
	}
	// Bytes 2-3 carry the credits the Conn returns: any number.
	if diff := cmp.Diff(wantPage[4:], got[4:]); diff != "" {
		t.Fatalf("page from the Conn after its header (-want +got):\n%s", diff)
	}
}

// recvRawKind polls p's completion queue for a received message of the
// given kind, skipping others (credit returns), and returns it.
func recvRawKind(t *testing.T, p *rawPeer, kind uint8, timeout time.Duration) []byte {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		n, err := p.cq.Read(p.cqBuf[:])
		if err != nil {
			var ce ofi.CompletionError
			if ok, _ := p.cq.ReadError(&ce); ok {
				t.Fatalf("raw peer: completion error %v", &ce.AsyncError)
			}
		}
		for _, c := range p.cqBuf[:n] {
			if c.Token >= 1<<32 {
				p.sent[c.Token] = true
				continue
			}
			b := p.rx.Bytes()[c.Token*rawBufSize:][:c.Len]
			if len(b) >= wHeaderSize && b[0] == kind {
				return bytes.Clone(b)
			}
		}
		if n == 0 {
			time.Sleep(50 * time.Microsecond) // polling pace: the raw peer has nothing to block on
		}
	}
	t.Fatalf("raw peer: no message of kind %d in %v", kind, timeout)
	return nil
}
