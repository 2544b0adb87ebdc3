package reactor_test

import (
	"fmt"
	"log"
	"time"

	"github.com/netio-go/netio/reactor"
)

// NetIO-next's "Hello World": the initialisation hook runs once on the
// reactor thread, before any other event, and terminates the loop.
func Example() {
	r, err := reactor.New(&reactor.Config{
		OnInit: func(r *reactor.Reactor) {
			fmt.Println("Hello, NetIO!")
			r.Stop()
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	r.Wait()
	r.Close()
	// Output: Hello, NetIO!
}

// NetIO-next's countdown: a periodic timer (1 ms here, 1 s in NetIO's
// example) prints 10 to 1 and terminates the loop.
func ExampleTimer() {
	r, err := reactor.New(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close() // also closes the timer
	counter := 10   // used only on the reactor
	t, err := r.NewTimer(func() {
		fmt.Println(counter)
		counter--
		if counter == 0 {
			r.Stop()
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := t.Start(time.Millisecond); err != nil {
		log.Fatal(err)
	}
	r.Wait()
	// Output:
	// 10
	// 9
	// 8
	// 7
	// 6
	// 5
	// 4
	// 3
	// 2
	// 1
}

// NetIO-next's signal example: a signal fired in the initialisation hook.
// Its callback runs on the loop after the hook has returned.
func ExampleSignal() {
	fired := false
	r, err := reactor.New(&reactor.Config{
		OnInit: func(r *reactor.Reactor) {
			s, err := r.NewSignal(func() {
				fired = true
				fmt.Println("on_signal()")
				r.Stop()
			})
			if err != nil {
				log.Fatal(err)
			}
			s.Fire()
			fmt.Println("on_init()")
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	r.Wait()  // the loop's exit happens before Wait returns...
	r.Close() // ...so reading fired here is safe
	if fired {
		fmt.Println("the signal has been fired")
	}
	// Output:
	// on_init()
	// on_signal()
	// the signal has been fired
}

// Signals are how other goroutines wake the loop: the callback runs once per
// Fire, on the reactor thread.
func ExampleSignal_Fire() {
	r, err := reactor.New(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	runs := 0 // used only on the reactor
	s, err := r.NewSignal(func() {
		runs++
		fmt.Println("signal", runs)
		if runs == 3 {
			r.Stop()
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		for range 3 {
			s.Fire()
		}
	}()
	r.Wait()
	// Output:
	// signal 1
	// signal 2
	// signal 3
}

// Call runs a function on the reactor thread and waits for it: the way for
// other goroutines to read or change state that only the reactor touches.
func ExampleReactor_Call() {
	r, err := reactor.New(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	owned := 0 // touched only on the reactor
	for range 5 {
		r.SubmitFunc(func() { owned++ })
	}
	var n int
	if err := r.Call(func() { n = owned }); err != nil { // runs after the five tasks
		log.Fatal(err)
	}
	fmt.Println(n)
	// Output: 5
}
