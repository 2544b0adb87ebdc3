package netio

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/netio-go/netio/internal/page"
	"github.com/netio-go/netio/internal/wire"
)

// A page's buffer holds Config.BufferSize bytes of messages besides its
// header and one record's prefix, up to the largest buffer, in both modes
// (LowLatency packs its messages into pages too). What a link posts and
// announces is that size.
func TestBufferFor(t *testing.T) {
	type sizes struct{ Plain, Tagged, Publishing, Packed int }
	of := func(n int) sizes {
		return sizes{bufferFor(page.Plain, n), bufferFor(page.Tagged(false), n), bufferFor(page.Tagged(true), n), bufferFor(page.Packed, n)}
	}
	for n, want := range map[int]sizes{
		minBufferSize:      {minBufferSize + 24, minBufferSize + 40, minBufferSize + 40, minBufferSize + 24},
		DefaultPageSize:    {DefaultPageSize + 24, DefaultPageSize + 40, DefaultPageSize + 40, DefaultPageSize + 24},
		maxBufferSize - 30: {maxBufferSize - 6, maxBufferSize, maxBufferSize, maxBufferSize - 6},
		maxBufferSize:      {maxBufferSize, maxBufferSize, maxBufferSize, maxBufferSize},
	} {
		if diff := cmp.Diff(want, of(n)); diff != "" {
			t.Errorf("buffers for %d bytes (-want +got):\n%s", n, diff)
		}
	}
	for _, m := range []Mode{LowLatency, HighThroughput} {
		c := Config{Mode: m}
		c.setDefaults()
		lc := newLinkConfig(wire.RoleConn, &c)
		want := c.BufferSize + wire.HeaderSize + page.PrefixSize
		if lc.rxBufSize != want || lc.txBufSize != want {
			t.Errorf("%v: link posts %d-byte buffers and sends %d, want %d", m, lc.rxBufSize, lc.txBufSize, want)
		}
	}
}
