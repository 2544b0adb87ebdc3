package netio_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netio-go/netio"
)

// pageMessage is message seq of writer w, of n bytes (at least 16): its
// bytes say whose it is.
func pageMessage(w, seq, n int) []byte {
	m := make([]byte, n)
	binary.LittleEndian.PutUint64(m, uint64(w))
	binary.LittleEndian.PutUint64(m[8:], uint64(seq))
	for j := 16; j < n; j++ {
		m[j] = byte(w*31 + seq + j)
	}
	return m
}

// A message of BufferSize bytes travels whole in one page, and NextMessage
// lends it from the receive buffer; one byte more and it spans two pages
// and is joined. Pages go out only when full or flushed here, so the count
// of pages is exact.
func TestBufferedPageSizeMessages(t *testing.T) {
	const page, count = 4096, 20
	for _, tc := range []struct {
		size   int
		whole  bool // lent from its receive buffer
		pages  int  // sent, or 0: not checked
		before int  // bytes of a message written before each one, or 0
	}{
		{size: page - 1, whole: true, pages: count},
		{size: page, whole: true, pages: count},
		{size: page + 1, whole: false},
		{size: 2 * page, whole: false},
		// A message that does not fit what a small one left of a page
		// starts the next page, and fits it whole.
		{size: page, whole: true, pages: 2 * count, before: 100},
	} {
		t.Run(fmt.Sprintf("%d-after-%d", tc.size, tc.before), func(t *testing.T) {
			c, s := pair(t, ht, netio.WithBufferSize(page), netio.WithWindow(4), netio.WithNoIdleFlush(), netio.WithFlushInterval(time.Hour))
			errc := make(chan error, 1)
			go func() {
				for i := range count {
					if tc.before > 0 {
						if _, err := c.Write(pageMessage(1, i, tc.before)); err != nil {
							errc <- err
							return
						}
					}
					if _, err := c.Write(pageMessage(0, i, tc.size)); err != nil {
						errc <- err
						return
					}
				}
				errc <- c.Flush()
			}()
			s.SetReadDeadline(time.Now().Add(hangTimeout))
			for i := range count {
				if tc.before > 0 {
					m, err := s.NextMessage()
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(m.Bytes(), pageMessage(1, i, tc.before)) {
						t.Fatalf("small message %d: %d bytes, not what was written", i, m.Len())
					}
					m.Release()
				}
				m, err := s.NextMessage()
				if err != nil {
					t.Fatal(err)
				}
				if want := pageMessage(0, i, tc.size); !bytes.Equal(m.Bytes(), want) {
					t.Fatalf("message %d: %d bytes, not the %d written", i, m.Len(), len(want))
				}
				if got := netio.InReceiveBuffer(m); got != tc.whole {
					t.Fatalf("message %d of %d bytes in a %d-byte page: lent from its receive buffer %v, want %v", i, tc.size, page, got, tc.whole)
				}
				m.Release()
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if st := c.Stats(); tc.pages > 0 && st.PagesSent != uint64(tc.pages) {
				t.Errorf("%d pages sent, want %d (stats %+v)", st.PagesSent, tc.pages, st)
			}
		})
	}
}

// Writers sharing a connection write messages of a page, a page plus one
// byte and a few bytes at once: each arrives whole and intact, in its
// writer's order.
func TestBufferedPageSizeConcurrentWriters(t *testing.T) {
	const page, writers, count = 4096, 4, 150
	c, s := pair(t, ht, netio.WithBufferSize(page), netio.WithWindow(4))
	sizes := []int{page, page + 1, 16, page - 8, page}
	var wg sync.WaitGroup
	errc := make(chan error, writers+1)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range count {
				if _, err := c.Write(pageMessage(w, i, sizes[(w+i)%len(sizes)])); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		errc <- c.Flush()
	}()
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	next := make([]int, writers)
	for range writers * count {
		m, err := s.NextMessage()
		if err != nil {
			t.Fatal(err)
		}
		b := m.Bytes()
		if len(b) < 16 {
			t.Fatalf("a message of %d bytes", len(b))
		}
		w, seq := int(binary.LittleEndian.Uint64(b)), int(binary.LittleEndian.Uint64(b[8:]))
		if w >= writers || seq != next[w] {
			t.Fatalf("message %d of writer %d arrived, want %v", seq, w, next)
		}
		if want := pageMessage(w, seq, sizes[(w+seq)%len(sizes)]); !bytes.Equal(b, want) {
			t.Fatalf("writer %d message %d: %d bytes, not the %d written", w, seq, len(b), len(want))
		}
		next[w]++
		m.Release()
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	want := make([]int, writers)
	for i := range want {
		want[i] = count
	}
	if diff := cmp.Diff(want, next); diff != "" {
		t.Errorf("messages per writer (-want +got):\n%s", diff)
	}
}
