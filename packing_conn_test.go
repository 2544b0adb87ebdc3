package netio_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// LowLatency connections pack the messages queued behind sends in flight
// (packing, sender.go). Whatever shares a buffer, a reader sees each message once,
// whole, and in the order each writer wrote it.

const (
	packWriters = 4
	packPerWrit = 2000
)

// packedMessage is message seq of writer w: mostly small, now and then
// larger than the 4 KiB buffers of these tests, so that it spans them.
func packedMessage(w, seq int) []byte {
	n := 8 + (seq*7+w)%90
	if seq%97 == 50 {
		n = 10000
	}
	b := bytes.Repeat([]byte{byte(w*31 + seq)}, n)
	binary.LittleEndian.PutUint32(b, uint32(w))
	binary.LittleEndian.PutUint32(b[4:], uint32(seq))
	return b
}

// packedOrder checks messages as they arrive: each writer's in order,
// none lost, none twice, each as written.
type packedOrder struct {
	next [packWriters]int
	n    int
}

func (o *packedOrder) check(m []byte) error {
	if len(m) < 8 {
		return fmt.Errorf("message of %d bytes", len(m))
	}
	w, seq := int(binary.LittleEndian.Uint32(m)), int(binary.LittleEndian.Uint32(m[4:]))
	if w >= packWriters || seq != o.next[w] {
		return fmt.Errorf("message %d of writer %d, want %d", seq, w, o.next[w])
	}
	if want := packedMessage(w, seq); !bytes.Equal(m, want) {
		return fmt.Errorf("message %d of writer %d: %d bytes, not the %d written", seq, w, len(m), len(want))
	}
	o.next[w]++
	o.n++
	return nil
}

// writeConcurrently writes every writer's messages from its own goroutine
// and returns the first error.
func writeConcurrently(c *netio.Conn) error {
	errs := make(chan error, packWriters)
	for w := range packWriters {
		go func() {
			for seq := range packPerWrit {
				if _, err := c.Write(packedMessage(w, seq)); err != nil {
					errs <- fmt.Errorf("writer %d, message %d: %w", w, seq, err)
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range packWriters {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func TestLowLatencyPackedConcurrentWriters(t *testing.T) {
	c, s := pair(t, netio.WithBufferSize(4096), netio.WithWindow(4))
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	read := make(chan error, 1)
	var o packedOrder
	go func() {
		buf := make([]byte, 16<<10)
		for i := 0; ; i++ {
			var err error
			if i%2 == 0 {
				var n int
				if n, err = s.ReadMessage(buf); err == nil {
					err = o.check(buf[:n])
				}
			} else {
				var m netio.Message
				if m, err = s.NextMessage(); err == nil {
					err = o.check(m.Bytes())
					m.Release()
				}
			}
			if err != nil {
				read <- err
				return
			}
		}
	}()
	if err := writeConcurrently(c); err != nil {
		t.Fatal(err)
	}
	// Close sends what the writers left in the open buffer.
	c.Close()
	if err := <-read; !errors.Is(err, io.EOF) {
		t.Fatalf("reading after %d messages: %v; want io.EOF after all %d", o.n, err, packWriters*packPerWrit)
	}
	if o.n != packWriters*packPerWrit {
		t.Fatalf("read %d messages, want %d", o.n, packWriters*packPerWrit)
	}
	st := c.Stats()
	t.Logf("%d messages in %d buffers", st.MessagesSent, st.PagesSent)
	if st.MessagesSent != packWriters*packPerWrit {
		t.Errorf("Stats().MessagesSent = %d, want %d", st.MessagesSent, packWriters*packPerWrit)
	}
}

// OnMessage is called once per message, packed or not.
func TestLowLatencyPackedOnMessage(t *testing.T) {
	var mu sync.Mutex
	var o packedOrder
	var bad error
	ln, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithBufferSize(4096), netio.WithWindow(4),
		netio.WithOnMessage(func(_ *netio.Conn, msg []byte) {
			mu.Lock()
			if err := o.check(msg); err != nil && bad == nil {
				bad = err
			}
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, _ := dialAccept(t, ln, netio.WithBufferSize(4096), netio.WithWindow(4))
	if err := writeConcurrently(c); err != nil {
		t.Fatal(err)
	}
	c.Close()
	eventually(t, "every message through OnMessage", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return o.n == packWriters*packPerWrit || bad != nil
	})
	mu.Lock()
	defer mu.Unlock()
	if bad != nil {
		t.Fatalf("after %d messages: %v", o.n, bad)
	}
}
