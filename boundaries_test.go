package netio_test

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netio-go/netio"
)

func TestReadStreamAcrossMessages(t *testing.T) {
	c, s := pair(t, netio.WithBufferSize(4096))
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	big := make([]byte, 10<<10)
	for i := range big {
		big[i] = byte(i*31 + i>>8)
	}
	next := []byte("the next message")
	for _, m := range [][]byte{big, next} {
		if _, err := c.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	var got []byte
	reads := 0
	buf := make([]byte, 1000)
	for len(got) < len(big) {
		n, err := s.Read(buf[:min(len(buf), len(big)-len(got))])
		if err != nil {
			t.Fatalf("Read after %d bytes: %v", len(got), err)
		}
		if n == 0 {
			t.Fatalf("Read returned 0 bytes and no error")
		}
		got = append(got, buf[:n]...)
		reads++
	}
	if diff := cmp.Diff(big, got); diff != "" {
		t.Fatalf("10 KiB message read with a 1000-byte buffer came out corrupted (-want +got):\n%s", diff)
	}
	if reads < 11 {
		t.Errorf("10 KiB read in %d Reads of at most 1000 bytes", reads)
	}
	p := make([]byte, 100)
	n, err := s.ReadMessage(p)
	if err != nil {
		t.Fatalf("message after the streamed one: %v; want %q", err, next)
	}
	if diff := cmp.Diff(next, p[:n]); diff != "" {
		t.Fatalf("message after the streamed one (-want +got):\n%s", diff)
	}

	// A partial Read, then ReadMessage returns the rest of that message.
	c.Write([]byte("0123456789"))
	c.Write([]byte("after"))
	if n, err := s.Read(p[:4]); err != nil || string(p[:n]) != "0123" {
		t.Fatalf("partial Read: %q, %v", p[:n], err)
	}
	if n, err := s.ReadMessage(p); err != nil || string(p[:n]) != "456789" {
		t.Fatalf("ReadMessage after a partial Read: %q, %v; want the rest, \"456789\"", p[:n], err)
	}
	if n, err := s.ReadMessage(p); err != nil || string(p[:n]) != "after" {
		t.Fatalf("ReadMessage: %q, %v; want \"after\"", p[:n], err)
	}

	// Read as a stream may join messages, in order.
	c.Write([]byte("abc"))
	c.Write([]byte("def"))
	var stream []byte
	for len(stream) < 6 {
		n, err := s.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, p[:n]...)
	}
	if string(stream) != "abcdef" {
		t.Fatalf("stream %q; want \"abcdef\"", stream)
	}
}

func TestReadMessageShortBuffer(t *testing.T) {
	c, s := pair(t, netio.WithBufferSize(4096))
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	msg := make([]byte, 10000) // spans three buffers
	for i := range msg {
		msg[i] = byte(i % 251)
	}
	c.Write(msg)
	c.Write([]byte("tail"))
	small := make([]byte, 100)
	for i := 0; i < 2; i++ { // and again: nothing was consumed
		n, err := s.ReadMessage(small)
		if !errors.Is(err, io.ErrShortBuffer) || n != 0 {
			t.Fatalf("ReadMessage of a 10000-byte message into 100 bytes: %d, %v; want 0, io.ErrShortBuffer", n, err)
		}
	}
	if n, err := s.MessageLen(); err != nil || n != len(msg) {
		t.Fatalf("MessageLen: %d, %v; want %d", n, err, len(msg))
	}
	prefix := []byte("prefix:")
	got, err := s.AppendMessage(prefix)
	if err != nil {
		t.Fatalf("AppendMessage after io.ErrShortBuffer: %v", err)
	}
	if diff := cmp.Diff(append([]byte("prefix:"), msg...), got); diff != "" {
		t.Fatalf("AppendMessage after io.ErrShortBuffer: want the prefix and the whole 10000-byte message (-want +got):\n%s", diff)
	}
	if n, err := s.ReadMessage(small); err != nil || string(small[:n]) != "tail" {
		t.Fatalf("next message: %q, %v; want \"tail\"", small[:n], err)
	}
}

func TestZeroLengthMessages(t *testing.T) {
	c, s := pair(t)
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	for _, m := range []string{"", "", "x", "", "yz"} {
		if n, err := c.Write([]byte(m)); err != nil || n != len(m) {
			t.Fatalf("Write(%q): %d, %v", m, n, err)
		}
	}
	p := make([]byte, 10)
	for i := 0; i < 2; i++ {
		if n, err := s.ReadMessage(p); err != nil || n != 0 {
			t.Fatalf("ReadMessage of an empty message: %d, %v; want 0, nil", n, err)
		}
	}
	if got, err := s.AppendMessage(nil); err != nil || string(got) != "x" {
		t.Fatalf("AppendMessage: %q, %v; want \"x\"", got, err)
	}
	// Read is a byte stream: the empty message is skipped.
	n, err := s.Read(p)
	if err != nil || string(p[:n]) != "yz" {
		t.Fatalf("Read over an empty message: %q, %v; want \"yz\"", p[:n], err)
	}
	// An empty message alone does not wake Read with 0 bytes. MessageLen
	// waits for it without consuming it: it is there before Read starts.
	c.Write(nil)
	if n, err := s.MessageLen(); err != nil || n != 0 {
		t.Fatalf("MessageLen with an empty message pending: %d, %v; want 0, nil", n, err)
	}
	s.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := s.Read(p); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read with only an empty message pending: %d, %v; want to keep waiting (deadline)", n, err)
	}
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	c.Write([]byte("end"))
	if n, err := s.Read(p); err != nil || string(p[:n]) != "end" {
		t.Fatalf("Read: %q, %v; want \"end\"", p[:n], err)
	}
}
