package netio_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

func TestManyConnections(t *testing.T) {
	const (
		conns = 50
		msgs  = 100
	)
	opts := []netio.Option{netio.WithBufferSize(4096), netio.WithWindow(8)}
	ln, err := netio.Listen("tcp", "127.0.0.1:0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	clients := make([]*netio.Conn, conns)
	servers := make([]*netio.Conn, conns)
	for i := range clients {
		clients[i], servers[i] = dialAccept(t, ln, opts...)
	}
	msg := func(conn, seq int) []byte {
		// Sizes from 0 to over one buffer, content tied to conn and seq.
		size := (conn*37 + seq*101) % 6000
		b := make([]byte, size)
		for k := range b {
			b[k] = byte(conn ^ seq*7 ^ k)
		}
		return b
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3*conns)
	deadline := time.Now().Add(3 * hangTimeout) // a backstop for the whole test
	for i := 0; i < conns; i++ {
		c, s := clients[i], servers[i]
		c.SetDeadline(deadline)
		s.SetDeadline(deadline)
		wg.Add(3)
		go func() { // server: echo every message
			defer wg.Done()
			buf := make([]byte, 0, 8192)
			for j := 0; j < msgs; j++ {
				m, err := s.AppendMessage(buf[:0])
				if err != nil {
					errs <- fmt.Errorf("conn %d server read %d: %w", i, j, err)
					return
				}
				if _, err := s.Write(m); err != nil {
					errs <- fmt.Errorf("conn %d server write %d: %w", i, j, err)
					return
				}
			}
		}()
		go func() { // client writer
			defer wg.Done()
			for j := 0; j < msgs; j++ {
				if _, err := c.Write(msg(i, j)); err != nil {
					errs <- fmt.Errorf("conn %d client write %d: %w", i, j, err)
					return
				}
			}
		}()
		go func() { // client reader
			defer wg.Done()
			buf := make([]byte, 0, 8192)
			for j := 0; j < msgs; j++ {
				m, err := c.AppendMessage(buf[:0])
				if err != nil {
					errs <- fmt.Errorf("conn %d client read %d: %w", i, j, err)
					return
				}
				if want := msg(i, j); !bytes.Equal(m, want) {
					errs <- fmt.Errorf("conn %d echo %d: %d bytes, want %d, content differs: %v", i, j, len(m), len(want), !bytes.Equal(m[:min(len(m), len(want))], want[:min(len(m), len(want))]))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
