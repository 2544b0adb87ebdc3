package netio_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netio-go/netio"
)

// A second Release of a Message panics, as sync.WaitGroup does on a
// negative counter: it would otherwise hand the memory back while another
// message still uses it, and that message's bytes would be overwritten.

// wantReleasedTwice calls release and checks that it panics with netio's
// message for a second Release.
func wantReleasedTwice(t *testing.T, what string, release func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != "netio: Message released twice" {
			t.Fatalf("%s: recovered %v, want the panic \"netio: Message released twice\"", what, r)
		}
	}()
	release()
}

func nextMessage(t *testing.T, c *netio.Conn) netio.Message {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(hangTimeout))
	defer c.SetReadDeadline(time.Time{})
	m, err := c.NextMessage()
	if err != nil {
		t.Fatalf("NextMessage: %v", err)
	}
	return m
}

func writeAll(t *testing.T, c *netio.Conn, msgs ...string) {
	t.Helper()
	for _, m := range msgs {
		if _, err := c.Write([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestReleaseTwicePanics(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.String(), func(t *testing.T) {
			client, server := pair(t, netio.WithMode(m))
			writeAll(t, client, "one", "two", "three")
			m1, m2, m3 := nextMessage(t, server), nextMessage(t, server), nextMessage(t, server)

			m1.Release()
			wantReleasedTwice(t, "second Release", m1.Release)
			copied := m2
			m2.Release()
			wantReleasedTwice(t, "Release of a copy of a released message", copied.Release)
			// The panics changed nothing: m3 is intact and still held.
			if got := string(m3.Bytes()); got != "three" {
				t.Fatalf("message held through the panics reads %q, want \"three\"", got)
			}
			m3.Release()

			// A late second Release is caught also once m1's buffer holds
			// other messages that are out: hold nearly a window of them
			// (buffers are reposted in order, so m1's comes round).
			window := netio.DefaultWindow
			if m == netio.HighThroughput {
				window = netio.DefaultPages
			}
			var held []netio.Message
			for i := 0; i < window-2; i++ {
				msg := fmt.Sprintf("held %d", i)
				writeAll(t, client, msg)
				held = append(held, nextMessage(t, server))
			}
			wantReleasedTwice(t, "second Release while the buffer holds other messages", m1.Release)
			for i, n := range held {
				if got, want := string(n.Bytes()), fmt.Sprintf("held %d", i); got != want {
					t.Fatalf("held message reads %q after the panic, want %q", got, want)
				}
				n.Release()
			}

			// And once the buffers have all been reused.
			for i := 0; i < 40; i++ {
				msg := fmt.Sprintf("later %d", i)
				writeAll(t, client, msg)
				n := nextMessage(t, server)
				if got := string(n.Bytes()); got != msg {
					t.Fatalf("read %q, want %q", got, msg)
				}
				n.Release()
			}
			wantReleasedTwice(t, "second Release after the buffer was reused", m1.Release)
			echo(t, client, server, []byte("still fine"))
		})
	}
}

// A message that arrived in several buffers is joined in a spare buffer:
// its second Release panics too, also once the spare holds another.
func TestReleaseTwiceJoined(t *testing.T) {
	client, server := pair(t, netio.WithBufferSize(4096))
	big := bytes.Repeat([]byte("joined "), 2000) // 14 KB: over four buffers
	for i := 0; i < 2; i++ {
		if _, err := client.Write(big); err != nil {
			t.Fatal(err)
		}
	}
	first := nextMessage(t, server)
	if diff := cmp.Diff(big, first.Bytes()); diff != "" {
		t.Fatalf("joined message (-want +got):\n%s", diff)
	}
	first.Release()
	wantReleasedTwice(t, "second Release of a joined message", first.Release)
	second := nextMessage(t, server) // in the same spare, recycled
	wantReleasedTwice(t, "Release of a joined message whose spare was reused", first.Release)
	if diff := cmp.Diff(big, second.Bytes()); diff != "" {
		t.Fatalf("joined message after the panics (-want +got):\n%s", diff)
	}
	second.Release()
}

func TestReleaseTwiceSubscription(t *testing.T) {
	p := listenPublisher(t)
	s := subscribe(t, p, []uint64{7})
	for i := 0; i < 3; i++ {
		if err := p.Publish(context.Background(), 7, payload(7, i, 32)); err != nil {
			t.Fatal(err)
		}
	}
	p.Flush()
	var got []netio.Message
	for len(got) < 3 {
		select {
		case m := <-s.C:
			got = append(got, m)
		case <-time.After(hangTimeout):
			t.Fatalf("%d of 3 messages", len(got))
		}
	}
	got[0].Release()
	wantReleasedTwice(t, "second Release of a subscription's message", got[0].Release)
	for i, m := range got[1:] {
		if diff := cmp.Diff(payload(7, i+1, 32), m.Bytes()); diff != "" {
			t.Fatalf("message %d after the panic (-want +got):\n%s", i+1, diff)
		}
		m.Release()
	}
}

// BenchmarkNextMessage is BenchmarkBuffered's HighThroughput stream read
// with NextMessage and Release, the path that tracks messages out: it
// must allocate nothing per message.
func BenchmarkNextMessage(b *testing.B) {
	for _, size := range []int{64, 1 << 10} {
		b.Run(sizeName(size), func(b *testing.B) { streamBufferedRelease(b, size) })
	}
}
