package netio_test

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/netio-go/netio"
)

func TestOnMessage(t *testing.T) {
	type got struct {
		c   *netio.Conn
		msg []byte
	}
	ch := make(chan got, 100)
	ln, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithBufferSize(4096), netio.WithOnMessage(func(c *netio.Conn, msg []byte) {
		// msg is only valid during the call.
		ch <- got{c, append([]byte(nil), msg...)}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, s := dialAccept(t, ln)
	big := make([]byte, 20000) // spans five 4 KiB buffers
	for i := range big {
		big[i] = byte(i * 13)
	}
	want := [][]byte{[]byte("one"), {}, big, []byte("two"), bytes.Repeat([]byte{'z'}, 4096-16), bytes.Repeat([]byte{'y'}, 4096-15), []byte("three")}
	for i, m := range want {
		if _, err := c.Write(m); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
	}
	var msgs [][]byte
	for i := range want {
		select {
		case g := <-ch:
			if g.c != s {
				t.Errorf("message %d: callback got Conn %v; want the accepted one %v", i, g.c, s)
			}
			msgs = append(msgs, g.msg)
		case <-time.After(hangTimeout):
			t.Fatalf("callback got %d of %d messages in %v", i, len(want), hangTimeout)
		}
	}
	// EquateEmpty: the empty message may reach the callback as nil.
	if diff := cmp.Diff(want, msgs, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("messages the callback got (-want +got):\n%s", diff)
	}
	// No extra message reached the callback: the next one it gets is the
	// next one written (checked in order below), whenever it comes.
	// Many more than the window: credits must flow back without a reader.
	for i := 0; i < 200; i++ {
		c.SetWriteDeadline(time.Now().Add(hangTimeout))
		if _, err := c.Write([]byte(strconv.Itoa(i))); err != nil {
			t.Fatalf("Write %d to an OnMessage connection: %v (the callback consumed every message, credits should come back)", i, err)
		}
		select {
		case g := <-ch:
			if string(g.msg) != strconv.Itoa(i) {
				t.Fatalf("message %q; want %q", g.msg, strconv.Itoa(i))
			}
		case <-time.After(hangTimeout):
			t.Fatalf("message %d never reached the callback", i)
		}
	}
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	if n, err := s.Read(make([]byte, 10)); err == nil {
		t.Fatalf("Read on an OnMessage connection: %d, nil; want an error", n)
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read on an OnMessage connection blocked until its deadline; want an immediate error")
	}
	if _, err := s.ReadMessage(make([]byte, 10)); err == nil {
		t.Fatalf("ReadMessage on an OnMessage connection succeeded; want an error")
	}
	// The callback side can still write back.
	if _, err := s.Write([]byte("reply")); err != nil {
		t.Fatalf("Write from an OnMessage connection: %v", err)
	}
	buf := make([]byte, 10)
	c.SetReadDeadline(time.Now().Add(hangTimeout))
	if n, err := c.ReadMessage(buf); err != nil || string(buf[:n]) != "reply" {
		t.Fatalf("reply: %q, %v", buf[:n], err)
	}
}
