package page

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/netio-go/netio/internal/page/pagetest"
	"github.com/netio-go/netio/internal/seedcorpus"
	"github.com/netio-go/netio/internal/wire"
)

// FuzzDecoder builds received buffers from the input (pagetest.ParseInput:
// lying headers and lengths included), decodes them with a Reader and a
// Cursor the way a reading goroutine does, and with an InlineReader the way
// the reactor does for OnMessage, and holds both to pagetest.Model: the
// same messages, the same bytes, the same end.
func FuzzDecoder(f *testing.F) {
	seedcorpus.Add(f, pagetest.DecoderSeeds())
	f.Fuzz(func(t *testing.T, data []byte) { runDecoder(t, data, false) })
}

// FuzzTagged is FuzzDecoder for tagged pages, with each record's tag and
// sequence number.
func FuzzTagged(f *testing.F) {
	seedcorpus.Add(f, pagetest.TaggedSeeds())
	f.Fuzz(func(t *testing.T, data []byte) { runDecoder(t, data, true) })
}

func TestDecoderSeeds(t *testing.T) {
	for _, target := range []struct {
		name   string
		seeds  []seedcorpus.Seed
		tagged bool
	}{
		{"FuzzDecoder", pagetest.DecoderSeeds(), false},
		{"FuzzTagged", pagetest.TaggedSeeds(), true},
	} {
		t.Run(target.name, func(t *testing.T) {
			seedcorpus.Check(t, target.name, target.seeds, func(t *testing.T, s seedcorpus.Seed) {
				in, end := runDecoder(t, s.In, target.tagged)
				if errorClass(end) != errorClass(s.End) {
					t.Fatalf("ends with %v, want %s", end, errorClass(s.End))
				}
				if in.Style != pagetest.ReadStreamStyle && len(in.Model.Msgs) != s.Msgs {
					t.Fatalf("%d messages before the end, want %d", len(in.Model.Msgs), s.Msgs)
				}
			})
		})
	}
}

// decoded is what a decoder made of the input's buffers.
type decoded struct {
	msgs   [][]byte
	tags   [][2]uint64
	stream []byte
	err    error
}

// runDecoder decodes the input both ways and checks the results against
// the model. It returns the input and how reading ended.
func runDecoder(t *testing.T, data []byte, tagged bool) (*pagetest.Input, error) {
	in := pagetest.ParseInput(data, tagged)
	f := Plain
	if tagged {
		f = Tagged(false)
	}
	m := &in.Model
	got := readPages(t, in, f)
	if errorClass(got.err) != errorClass(m.End()) {
		t.Fatalf("reading ended with %v (%s); the model ends with %s", got.err, errorClass(got.err), errorClass(m.End()))
	}
	if !bytes.Equal(got.stream, m.Stream) {
		t.Fatalf("read %d bytes %.64x; the pages hold %d bytes %.64x", len(got.stream), got.stream, len(m.Stream), m.Stream)
	}
	checkMessages(t, "Reader", got.msgs, m.Msgs)
	if tagged {
		for i, tg := range got.tags {
			if tg != m.Tags[i] {
				t.Fatalf("record %d: tag and sequence %v; the pages hold %v", i, tg, m.Tags[i])
			}
		}
	}
	inline := deliverPages(t, in, f)
	if errorClass(inline.err) != errorClass(m.End()) && !(inline.err == nil && m.End() != nil && m.Err == nil) {
		t.Fatalf("inline reader ended with %v (%s); the model ends with %s", inline.err, errorClass(inline.err), errorClass(m.End()))
	}
	checkMessages(t, "InlineReader", inline.msgs, m.Msgs)
	return in, got.err
}

func checkMessages(t *testing.T, who string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s read %d messages; the pages hold %d", who, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: message %d: %d bytes %.64x; the pages hold %d bytes %.64x", who, i, len(got[i]), got[i], len(want[i]), want[i])
		}
	}
}

// vet is the reactor's part, in miniature: a buffer's length against its
// header, credits and FIN, and Check, which the input's bypass skips for a
// page whose continuation count exceeds its payload, so that the reader
// must refuse it on its own. It returns the page's payload and header, or
// ok false for a buffer that carries no data.
func vet(b []byte, f Format, fin *bool, bypass bool) (p []byte, h wire.Header, ok bool, err error) {
	if len(b) < wire.HeaderSize {
		return nil, h, false, fmt.Errorf("%w: truncated message of %d bytes", wire.ErrProtocol, len(b))
	}
	h = wire.ReadHeader(b)
	p = b[wire.HeaderSize:]
	switch {
	case uint64(h.FragLen) != uint64(len(p)):
		return nil, h, false, fmt.Errorf("%w: header says %d bytes, %d arrived", wire.ErrProtocol, h.FragLen, len(p))
	case h.Kind == wire.KindCredit:
		return nil, h, false, nil
	case h.Kind == wire.KindFin:
		*fin = true
		return nil, h, false, nil
	case *fin:
		return nil, h, false, fmt.Errorf("%w: data after the peer closed", wire.ErrProtocol)
	}
	if !(bypass && h.Kind == f.Kind && h.MsgLen > uint64(h.FragLen)) {
		if err := f.Check(h); err != nil {
			return nil, h, false, err
		}
	}
	return p, h, true, nil
}

// readPages reads the pages with a Reader and a Cursor. The input's style
// chooses the paths: Record where a message lies whole in its page (the
// message reads), Records in batches of size+1 (NextBatch), or Begin and
// chunks of size+1 bytes (the stream), in turn for the mixed style.
func readPages(t *testing.T, in *pagetest.Input, f Format) (d decoded) {
	r := f.Reader()
	c := Cursor{Max: in.Max}
	fin := false
	dst := make([][]byte, in.Size+1)
	var cur []byte
	var curTag [2]uint64
	turn := uint8(in.Size)
	took := func(b []byte, tag [2]uint64) {
		if cap(b) != len(b) {
			t.Fatalf("message of %d bytes has capacity %d", len(b), cap(b))
		}
		d.msgs = append(d.msgs, bytes.Clone(b))
		d.stream = append(d.stream, b...)
		if f.Prefix == TaggedPrefixSize {
			d.tags = append(d.tags, tag)
		}
	}
	for _, b := range in.Bufs {
		p, h, ok, err := vet(b, f, &fin, in.Bypass)
		if !ok {
			if d.err = err; err != nil {
				return d
			}
			continue
		}
		if err := r.Enter(&c, p, h); err != nil {
			d.err = err
			return d
		}
		for c.Ready() || c.More() {
			if c.Ready() {
				ch := c.Chunk()
				if in.Style == pagetest.ReadStreamStyle {
					ch = ch[:min(len(ch), in.Size+1)]
				}
				cur = append(cur, ch...)
				d.stream = append(d.stream, ch...)
				c.Consume(len(ch))
				if !c.InMsg {
					d.msgs = append(d.msgs, cur)
					if f.Prefix == TaggedPrefixSize {
						d.tags = append(d.tags, curTag)
					}
					cur = nil
				}
				continue
			}
			style := in.Style
			if style == pagetest.MixedStyle {
				turn = turn*37 + 11
				style = int(turn) % pagetest.MixedStyle
			}
			switch style {
			case pagetest.NextBatchStyle:
				n, bytes := r.Records(&c, dst)
				sum := uint64(0)
				for _, b := range dst[:n] {
					took(b, [2]uint64{})
					sum += uint64(len(b))
				}
				if sum != bytes {
					t.Fatalf("Records took %d messages of %d bytes, and says %d", n, sum, bytes)
				}
				if n > 0 {
					continue
				}
			case pagetest.NextMessageStyle, pagetest.NextStyle:
				if b, ok := r.Record(&c); ok {
					took(b, [2]uint64{c.Tag, c.Seq})
					continue
				}
			}
			if err := r.Begin(&c); err != nil {
				c.Drop()
				d.err = err
				return d
			}
			cur, curTag = []byte{}, [2]uint64{c.Tag, c.Seq}
		}
		c.Leave()
	}
	d.err = io.EOF
	if c.InMsg {
		d.err = io.ErrUnexpectedEOF
	}
	return d
}

// deliverPages reads the pages with an InlineReader, as the reactor does
// for OnMessage. A message cut short by the end is not delivered, and
// nothing reports it: the inline reader's end is nil then.
func deliverPages(t *testing.T, in *pagetest.Input, f Format) (d decoded) {
	ir := NewInlineReader(f, in.Max)
	fin := false
	for _, b := range in.Bufs {
		p, h, ok, err := vet(b, f, &fin, in.Bypass)
		if !ok {
			if d.err = err; err != nil {
				return d
			}
			continue
		}
		if err := ir.Deliver(p, h, func(m []byte) {
			if uint64(len(m)) > in.Max {
				t.Fatalf("delivered %d bytes, limit %d", len(m), in.Max)
			}
			d.msgs = append(d.msgs, bytes.Clone(m))
		}); err != nil {
			d.err = err
			return d
		}
	}
	if !ir.pos.InMsg {
		d.err = io.EOF
	}
	return d
}

func errorClass(err error) string { return pagetest.ErrorClass(err) }
