package netio_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/netio-go/netio"
)

// pair returns a connected client and server.
func pair(t testing.TB, opts ...netio.Option) (client, server *netio.Conn) {
	t.Helper()
	ln, err := netio.Listen("tcp", "127.0.0.1:0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		c   *netio.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.AcceptConn()
		ch <- res{c, err}
	}()
	client, err = netio.Dial("tcp", ln.Addr().String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		client.Close()
		t.Fatal(r.err)
	}
	t.Cleanup(func() { client.Close(); r.c.Close() })
	return client, r.c
}

func TestEcho(t *testing.T) {
	c, s := pair(t)
	msgs := [][]byte{[]byte("hello"), {}, bytes.Repeat([]byte("x"), 1000), []byte("end")}
	for _, m := range msgs {
		if n, err := c.Write(m); err != nil || n != len(m) {
			t.Fatalf("Write: %d, %v", n, err)
		}
	}
	buf := make([]byte, 2000)
	var got [][]byte
	for i := range msgs {
		n, err := s.ReadMessage(buf)
		if err != nil {
			t.Fatalf("ReadMessage %d: %v", i, err)
		}
		got = append(got, append([]byte(nil), buf[:n]...))
	}
	// EquateEmpty: the empty message arrives as an empty slice, nil here.
	if diff := cmp.Diff(msgs, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("messages (-want +got):\n%s", diff)
	}
}

func TestLargeMessageFragments(t *testing.T) {
	c, s := pair(t, netio.WithBufferSize(4096), netio.WithWindow(4))
	msg := make([]byte, 1<<20+123)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	errc := make(chan error, 1)
	go func() { _, err := c.Write(msg); errc <- err }()
	got, err := s.AppendMessage(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// bytes.Equal, not cmp.Diff: cmp takes most of a second to compare
	// 1 MiB byte by byte, and a diff of corrupted megabytes says nothing.
	if !bytes.Equal(got, msg) {
		t.Fatalf("1 MiB message over 4 KiB buffers: got %d bytes, corrupted", len(got))
	}
}

func TestCloseGivesEOF(t *testing.T) {
	c, s := pair(t)
	c.Write([]byte("last words"))
	c.Close()
	b, err := io.ReadAll(s)
	if err != nil || string(b) != "last words" {
		t.Fatalf("ReadAll: %q, %v", b, err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
}

func TestReadDeadline(t *testing.T) {
	_, s := pair(t)
	s.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := s.Read(make([]byte, 10))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past deadline: %v", err)
	}
}
