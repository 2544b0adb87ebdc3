package main

import (
	"expvar"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"

	"github.com/netio-go/netio"
)

// observeFlags are the flags that show netio's own view of a command's
// connections while it runs: its counters over HTTP (expvar) and its
// connection-level events on stderr.
type observeFlags struct {
	debugAddr *string
	log       *bool
}

func registerObserve(fs *flag.FlagSet) observeFlags {
	return observeFlags{
		debugAddr: fs.String("debug-addr", "", "serve the counters of netio's connections as JSON on http://`host:port`/debug/vars while running (expvar)"),
		log:       fs.Bool("log", false, "log netio's connection-level events (failures, rejections, time-outs) on stderr"),
	}
}

// start serves the counters and makes the logger the flags ask for, and
// returns the options that pass the logger on, and what stops the server.
func (o observeFlags) start(stderr io.Writer) ([]netio.Option, func(), error) {
	var opts []netio.Option
	if *o.log {
		opts = append(opts, netio.WithLogger(slog.New(slog.NewTextHandler(stderr, nil))))
	}
	if *o.debugAddr == "" {
		return opts, func() {}, nil
	}
	ln, err := net.Listen("tcp", *o.debugAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("-debug-addr: %w", err)
	}
	if expvar.Get("netio") == nil {
		netio.PublishExpvar("netio")
	}
	mux := http.NewServeMux()
	mux.Handle("/debug/vars", expvar.Handler())
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	fmt.Fprintf(stderr, "netio's counters on http://%s/debug/vars\n", ln.Addr())
	return opts, func() { srv.Close() }, nil
}
