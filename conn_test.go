package netio_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/netio-go/netio"
)

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

// A message far larger than the receive buffers is read whole by every
// read that returns whole messages, though none makes room for it all
// before its bytes arrive (the length is the peer's word).
func TestLargeMessageEveryRead(t *testing.T) {
	c, s := pair(t, netio.WithBufferSize(4096), netio.WithWindow(4))
	msgs := make([][]byte, 5)
	for i := range msgs {
		msgs[i] = make([]byte, 1<<20+i*4099)
		for j := range msgs[i] {
			msgs[i][j] = byte(i + j*7)
		}
	}
	errc := make(chan error, 1)
	go func() {
		for _, m := range msgs {
			if _, err := c.Write(m); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	reads := []struct {
		name string
		read func() ([]byte, error)
	}{
		{"NextMessage", func() ([]byte, error) {
			m, err := s.NextMessage()
			b := bytes.Clone(m.Bytes())
			m.Release()
			return b, err
		}},
		{"Next", func() ([]byte, error) { b, err := s.Next(); return bytes.Clone(b), err }},
		{"AppendMessage", func() ([]byte, error) { return s.AppendMessage(make([]byte, 0, 10)) }},
		{"ReadMessage", func() ([]byte, error) {
			b := make([]byte, 2<<20)
			n, err := s.ReadMessage(b)
			return b[:n], err
		}},
		{"NextBatch", func() ([]byte, error) {
			var batch [4][]byte
			n, err := s.NextBatch(batch[:])
			if n != 1 {
				return nil, fmt.Errorf("%d messages, %v", n, err)
			}
			return bytes.Clone(batch[0]), err
		}},
	}
	for i, r := range reads {
		got, err := r.read()
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if !bytes.Equal(got, msgs[i]) {
			t.Fatalf("%s: got %d bytes, want %d: corrupted", r.name, len(got), len(msgs[i]))
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
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
