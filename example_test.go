package netio_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/reactor"
)

// An echo server and a client: Listen and Dial work like the net package's,
// the network names the libfabric provider, ReadMessage keeps message
// boundaries. README.md shows this program whole.
func Example() {
	// "tcp" names the libfabric provider ("verbs", "efa", ...); the address is host:port.
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()

	go func() { // the server echoes every message back
		for {
			c, err := ln.AcceptConn() // or ln.Accept() for a net.Conn
			if err != nil {
				return // net.ErrClosed once ln is closed
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := c.ReadMessage(buf) // exactly one message
					if err != nil {
						if !errors.Is(err, io.EOF) { // io.EOF: the client closed
							log.Print(err)
						}
						return
					}
					if _, err := c.Write(buf[:n]); err != nil {
						log.Print(err)
						return
					}
				}
			}()
		}
	}()

	c, err := netio.Dial("tcp", ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	for _, msg := range []string{"hello", "netio"} {
		if _, err := c.Write([]byte(msg)); err != nil { // one message
			log.Fatal(err)
		}
		reply, err := c.AppendMessage(nil) // one whole message, grown to fit
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(reply))
	}
	if err := c.Close(); err != nil { // the server then reads io.EOF
		log.Fatal(err)
	}
	// Output:
	// hello
	// netio
}

// A Conn is a net.Conn: Read sees the messages as one byte stream, so
// io.Copy, bufio and net/http work over it unchanged.
func ExampleConn_Read() {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := netio.Dial("tcp", ln.Addr().String())
		if err != nil {
			return
		}
		c.Write([]byte("two "))
		c.Write([]byte("messages"))
		c.Close() // the reader sees io.EOF after the data
	}()
	c, err := ln.AcceptConn()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	all, err := io.ReadAll(c)
	fmt.Printf("%q %v\n", all, err)
	// Output: "two messages" <nil>
}

// WithOnMessage is NetIO's low-latency receive socket: the callback runs on
// the reactor as each message arrives and must not block.
func ExampleWithOnMessage() {
	got := make(chan string, 1)
	ln, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithOnMessage(func(c *netio.Conn, msg []byte) {
		got <- string(msg) // msg is only valid during the call: copy it
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	received := make(chan struct{})
	go func() {
		if s, err := ln.AcceptConn(); err == nil {
			defer s.Close()
			<-received // keep the connection until the message is in
		}
	}()
	c, err := netio.Dial("tcp", ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("trigger"))
	fmt.Println(<-got)
	close(received)
	// Output: trigger
}

// The reactor that drives every connection is NetIO-next's event loop and
// can be used on its own: here the seeds' countdown timer.
func Example_reactor() {
	done := make(chan struct{})
	r, err := reactor.New(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	counter := 3
	var t *reactor.Timer
	t, err = r.NewTimer(func() {
		fmt.Println(counter) // on the reactor thread
		if counter--; counter == 0 {
			t.Stop()
			close(done)
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	t.Start(time.Millisecond)
	<-done
	// Output:
	// 3
	// 2
	// 1
}

// In HighThroughput mode Write copies each message into a page, and pages
// go out when full, on Flush, when the writer pauses and at the latest
// after FlushInterval. WriteBatch writes many messages under one lock;
// Flush sends the current page now. The reader takes messages without a
// copy: Next (valid until the next read), NextBatch (many at once, as
// valid), NextMessage (valid until its Release).
func ExampleWithMode_highThroughput() {
	ht := netio.WithMode(netio.HighThroughput) // both ends use the same mode
	ln, err := netio.Listen("tcp", "127.0.0.1:0", ht)
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	c, err := netio.Dial("tcp", ln.Addr().String(), ht)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := ln.AcceptConn()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	msgs := [][]byte{[]byte("one"), []byte("two"), []byte("three"), []byte("four"), []byte("five")}
	if _, err := c.WriteBatch(msgs); err != nil {
		log.Fatal(err)
	}
	if err := c.Flush(); err != nil { // now, not when the page is full
		log.Fatal(err)
	}

	m, err := s.Next() // valid until the next read on s
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("Next: %s\n", m)

	kept, err := s.NextMessage() // valid until Release, across reads
	if err != nil {
		log.Fatal(err)
	}

	// NextBatch returns the messages at hand, at least one: loop until
	// the three left have come.
	batch := make([][]byte, 8)
	for left := 3; left > 0; {
		n, err := s.NextBatch(batch)
		if err != nil {
			log.Fatal(err)
		}
		for _, m := range batch[:n] {
			fmt.Printf("NextBatch: %s\n", m)
		}
		left -= n
	}
	fmt.Printf("NextMessage: %s\n", kept.Bytes())
	kept.Release() // the page goes back to the fabric once all is released
	// Output:
	// Next: one
	// NextBatch: three
	// NextBatch: four
	// NextBatch: five
	// NextMessage: two
}

// TryWrite never waits: when the free send buffers cannot take the message
// it returns ErrWouldBlock, and the caller decides what to do (here: wait
// for room with Write).
func ExampleConn_TryWrite() {
	ht := netio.WithMode(netio.HighThroughput)
	ln, err := netio.Listen("tcp", "127.0.0.1:0", ht)
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	c, err := netio.Dial("tcp", ln.Addr().String(), ht)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := ln.AcceptConn()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	msg := []byte("tick")
	if _, err := c.TryWrite(msg); errors.Is(err, netio.ErrWouldBlock) {
		// No room now: do something else, or wait for it.
		_, err = c.Write(msg)
		if err != nil {
			log.Fatal(err)
		}
	} else if err != nil {
		log.Fatal(err)
	}
	c.Flush()
	got, err := s.AppendMessage(nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(got))
	// Output: tick
}

// DialContext gives up when its context ends: here a deadline. Set-up is
// also bounded by Config.ConnectTimeout (WithConnectTimeout), whichever
// comes first.
func ExampleDialContext() {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := netio.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Println("connected over", c.RemoteAddr().Network())

	// A deadline that has passed: the dial fails at once, and the error
	// says why.
	past, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	_, err = netio.DialContext(past, "tcp", ln.Addr().String())
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	// Output:
	// connected over tcp
	// true
}

// netio's errors are the net package's: a *net.OpError wrapping the cause,
// which errors.Is and errors.As find. io.EOF ends a stream whose peer
// closed, os.ErrDeadlineExceeded a read past its deadline, net.ErrClosed a
// use of a closed connection.
func Example_errors() {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	c, err := netio.Dial("tcp", ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	s, err := ln.AcceptConn()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	s.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	_, err = s.ReadMessage(make([]byte, 64))
	fmt.Println("deadline:", errors.Is(err, os.ErrDeadlineExceeded))

	c.Close()
	s.SetReadDeadline(time.Time{})
	_, err = s.ReadMessage(make([]byte, 64))
	fmt.Println("peer closed:", errors.Is(err, io.EOF))

	_, err = c.Write([]byte("too late"))
	fmt.Println("closed:", errors.Is(err, net.ErrClosed))

	_, err = netio.Dial("tcp", "127.0.0.1:99999")
	var addrErr *net.AddrError
	fmt.Println("bad port:", errors.As(err, &addrErr), addrErr.Err)
	// Output:
	// deadline: true
	// peer closed: true
	// closed: true
	// bad port: true invalid port
}

// A Dialer and a ListenConfig take a Config instead of options: here one
// that a configuration file could fill, the mode given by name.
func ExampleDialer() {
	var cfg netio.Config
	if err := cfg.Mode.UnmarshalText([]byte("high-throughput")); err != nil {
		log.Fatal(err)
	}
	lc := netio.ListenConfig{Config: cfg}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()

	d := netio.Dialer{Config: cfg}
	c, err := d.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := ln.AcceptConn()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	c.Write([]byte("from a Dialer"))
	c.Flush()
	msg, err := s.AppendMessage(nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s in %v mode\n", msg, cfg.Mode)
	// Output: from a Dialer in high-throughput mode
}

// A ListenConfig's Config can come from a configuration file: the mode
// is decoded by name (Mode.UnmarshalText), zero fields are defaults.
func ExampleListenConfig() {
	var cfg netio.Config
	if err := json.Unmarshal([]byte(`{"Mode": "ht", "Backlog": 16}`), &cfg); err != nil {
		log.Fatal(err)
	}
	lc := netio.ListenConfig{Config: cfg}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	fmt.Println("listening in", cfg.Mode, "mode")

	// A Dialer in the other mode is turned away.
	_, err = (&netio.Dialer{}).Dial("tcp", ln.Addr().String())
	fmt.Println(errors.Is(err, netio.ErrRejected))
	// Output:
	// listening in high-throughput mode
	// true
}

// AcceptContext gives up when its context ends; the listener stays open.
func ExampleListener_AcceptContext() {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = ln.AcceptContext(ctx) // nobody dials
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	// Output: true
}

// ReadMessageContext waits for a message until its context ends; the
// connection stays usable. NextMessageContext does the same for
// NextMessage.
func ExampleConn_ReadMessageContext() {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	c, err := netio.Dial("tcp", ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := ln.AcceptConn()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	buf := make([]byte, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = s.ReadMessageContext(ctx, buf) // nothing was sent
	fmt.Println("gave up:", errors.Is(err, context.DeadlineExceeded))

	c.Write([]byte("late"))
	m, err := s.NextMessageContext(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("then read:", string(m.Bytes()))
	m.Release()
	// Output:
	// gave up: true
	// then read: late
}

// CloseWrite ends what this side sends, as a TCP half-close does: the peer
// reads io.EOF after the last message, and can still answer.
func ExampleConn_CloseWrite() {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()

	go func() { // counts the requests until io.EOF, then answers
		s, err := ln.AcceptConn()
		if err != nil {
			return
		}
		defer s.Close()
		n := 0
		for {
			if _, err := s.AppendMessage(nil); err != nil {
				break // io.EOF: the client has said everything
			}
			n++
		}
		fmt.Fprintf(s, "%d requests", n)
	}()

	c, err := netio.Dial("tcp", ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for _, req := range []string{"a", "b", "c"} {
		c.Write([]byte(req))
	}
	if err := c.CloseWrite(); err != nil {
		log.Fatal(err)
	}
	reply, err := c.AppendMessage(nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(reply))
	// Output: 3 requests
}
