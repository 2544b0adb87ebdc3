package netio_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/netio-go/netio"
)

// A publisher and a subscriber in one process: every message published
// under a subscribed tag arrives with its tag and its sequence number;
// tag 8 has no subscriber, so publishing to it sends nothing.
func ExampleListenPublisher() {
	pub, err := netio.ListenPublisher("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	ctx := context.Background()
	sub, err := netio.Subscribe(ctx, "tcp", pub.Addr().String(), []uint64{7})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()

	pub.Publish(ctx, 7, []byte("hello"))
	pub.Publish(ctx, 8, []byte("to nobody"))
	pub.Publish(ctx, 7, []byte("world"))
	for range 2 {
		m := <-sub.C
		fmt.Printf("tag %d seq %d: %s\n", m.Tag(), m.Seq(), m.Bytes())
		m.Release()
	}
	st := pub.Stats()
	fmt.Printf("published %d, to no subscriber %d\n", st.Published, st.Unsubscribed)
	// Output:
	// tag 7 seq 0: hello
	// tag 7 seq 1: world
	// published 2, to no subscriber 1
}

// A HighThroughput subscriber to two tags: the publisher batches its
// messages into pages, so Flush sends them without waiting for the page
// to fill. Each tag counts its own sequence.
func ExampleSubscribe() {
	pub, err := netio.ListenPublisher("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	ctx := context.Background()
	sub, err := netio.Subscribe(ctx, "tcp", pub.Addr().String(), []uint64{1, 2}, netio.WithMode(netio.HighThroughput))
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()

	pub.Publish(ctx, 1, []byte("a"))
	pub.Publish(ctx, 2, []byte("b"))
	pub.Publish(ctx, 1, []byte("c"))
	pub.Flush()
	for range 3 {
		m := <-sub.C
		fmt.Printf("tag %d seq %d: %s\n", m.Tag(), m.Seq(), m.Bytes())
		m.Release()
	}
	// Output:
	// tag 1 seq 0: a
	// tag 2 seq 0: b
	// tag 1 seq 1: c
}

// A subscriber that falls behind under DropOldest keeps the newest
// messages and never holds the publisher back: with a buffer of 2 and 5
// messages published before it reads, it gets the last two. The sequence
// numbers show what is missing, and Stats counts it.
func ExampleWithPolicy() {
	pub, err := netio.ListenPublisher("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	ctx := context.Background()
	sub, err := netio.Subscribe(ctx, "tcp", pub.Addr().String(), []uint64{7},
		netio.WithPolicy(netio.DropOldest), netio.WithSubscriptionBuffer(2))
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()

	for i := range 5 {
		pub.Publish(ctx, 7, fmt.Appendf(nil, "message %d", i))
	}
	// Here the reader simply is late: wait until all five have arrived.
	for st := sub.Stats(); st.Received+st.Dropped < 5; st = sub.Stats() {
		time.Sleep(time.Millisecond) // polling the counters: no event says a message was dropped
	}
	for range 2 {
		m := <-sub.C
		fmt.Printf("seq %d: %s\n", m.Seq(), m.Bytes())
		m.Release()
	}
	st := sub.Stats()
	fmt.Printf("received %d, dropped %d, lost on the way %d\n", st.Received, st.Dropped, st.Missed)
	// Output:
	// seq 3: message 3
	// seq 4: message 4
	// received 2, dropped 3, lost on the way 0
}

// Shutdown ends a publisher once its subscribers have what it published,
// and tells them so: the subscription reports the publisher closed, and
// here, allowed one try to reconnect, gives up and closes C.
func ExamplePublisher_Shutdown() {
	pub, err := netio.ListenPublisher("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	sub, err := netio.Subscribe(ctx, "tcp", pub.Addr().String(), []uint64{7}, netio.WithMaxReconnects(1))
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()

	for i := range 3 {
		pub.Publish(ctx, 7, fmt.Appendf(nil, "message %d", i))
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	fmt.Println("shutdown:", pub.Shutdown(sctx))
	for m := range sub.C {
		fmt.Printf("seq %d: %s\n", m.Seq(), m.Bytes())
		m.Release()
	}
	for ev := range sub.Events() {
		fmt.Printf("%v (the publisher closed: %v)\n", ev.Kind, errors.Is(ev.Err, netio.ErrPublisherClosed))
	}
	// Output:
	// shutdown: <nil>
	// seq 0: message 0
	// seq 1: message 1
	// seq 2: message 2
	// disconnected (the publisher closed: true)
	// closed (the publisher closed: true)
}
