package netio_test

import (
	"errors"
	"testing"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/internal/wire"
)

func TestOptionErrorsAreInvalidConfig(t *testing.T) {
	for name, opt := range map[string]netio.Option{
		"buffer":   netio.WithBufferSize(1),
		"window":   netio.WithWindow(1 << 20),
		"max":      netio.WithMaxMessageSize(0),
		"linger":   netio.WithLinger(-1),
		"backlog":  netio.WithBacklog(0),
		"mode":     netio.WithMode(7),
		"timeout":  netio.WithConnectTimeout(0),
		"interval": netio.WithFlushInterval(0),
	} {
		_, err := netio.Listen("tcp", "127.0.0.1:0", opt)
		if !errors.Is(err, netio.ErrInvalidConfig) {
			t.Errorf("%s: Listen error %v, want ErrInvalidConfig", name, err)
		}
	}
	// A Config given whole is checked the same way.
	_, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithConfig(netio.Config{Window: 2}))
	if !errors.Is(err, netio.ErrInvalidConfig) {
		t.Errorf("WithConfig with a window of 2: %v, want ErrInvalidConfig", err)
	}
}

// WithConfig after another option would undo it without a word.
func TestWithConfigComesFirst(t *testing.T) {
	_, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithMode(netio.HighThroughput), netio.WithConfig(netio.Config{}))
	if !errors.Is(err, netio.ErrInvalidConfig) {
		t.Fatalf("WithConfig after WithMode: %v, want ErrInvalidConfig", err)
	}
	ln, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithConfig(netio.Config{Linger: 1}), netio.WithMode(netio.HighThroughput))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// The listener is HighThroughput: a LowLatency dial is rejected.
	if c, err := netio.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("a LowLatency Dial to a listener configured HighThroughput after WithConfig succeeded")
	} else if !errors.Is(err, netio.ErrRejected) {
		t.Fatalf("Dial: %v, want ErrRejected", err)
	}
}

// The wire's ranges are netio's own: a peer's hello may offer what a
// Config may hold, and no more.
func TestWireLimitsMatchConfig(t *testing.T) {
	if netio.MaxBufferSize != wire.MaxBufferSize || netio.MaxWindow != wire.MaxWindow || uint8(netio.HighThroughput) != wire.MaxMode || uint8(netio.DropNewest) != wire.MaxPolicy {
		t.Fatalf("wire limits (buffer %d, window %d, mode %d, policy %d) differ from Config's (%d, %d, %d, %d)",
			wire.MaxBufferSize, wire.MaxWindow, wire.MaxMode, wire.MaxPolicy, netio.MaxBufferSize, netio.MaxWindow, netio.HighThroughput, netio.DropNewest)
	}
}
