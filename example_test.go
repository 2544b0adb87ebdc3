package netio_test

import (
	"fmt"
	"io"
	"log"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/reactor"
)

// Listen and Dial work like the net package's; the network names the
// libfabric provider. ReadMessage keeps message boundaries.
func Example() {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()

	go func() {
		c, err := ln.AcceptConn()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 1024)
		for {
			n, err := c.ReadMessage(buf)
			if err != nil {
				return // io.EOF once the client closes
			}
			c.Write(append([]byte("echo: "), buf[:n]...))
		}
	}()

	c, err := netio.Dial("tcp", ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for _, msg := range []string{"hello", "netio"} {
		c.Write([]byte(msg))
		reply, err := c.AppendMessage(nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(reply))
	}
	// Output:
	// echo: hello
	// echo: netio
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
