package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	h := Header{Kind: KindTagged, Flags: FlagLast | FlagHalfClose, Credits: 0xfffe, FragLen: 1<<32 - 1, MsgLen: 1<<64 - 1}
	b := make([]byte, HeaderSize+3)
	PutHeader(b, h)
	if got := ReadHeader(b); got != h {
		t.Fatalf("read %+v, wrote %+v", got, h)
	}
	PutCredits(b, 7)
	h.Credits = 7
	if got := ReadHeader(b); got != h {
		t.Fatalf("after PutCredits read %+v, want %+v", got, h)
	}
	if !bytes.Equal(b[HeaderSize:], []byte{0, 0, 0}) {
		t.Fatal("the header wrote past its 16 bytes")
	}
}

func TestDataKinds(t *testing.T) {
	for k := 0; k < 256; k++ {
		if want := k == KindPage || k == KindTagged; DataKind(uint8(k)) != want {
			t.Fatalf("DataKind(%d) = %v", k, !want)
		}
	}
}

func TestRolePeers(t *testing.T) {
	for _, c := range []struct{ r, peer Role }{{RoleConn, RoleConn}, {RoleSubscriber, RolePublisher}, {RolePublisher, RoleSubscriber}} {
		if got := c.r.Peer(); got != c.peer {
			t.Fatalf("%v's peer is %v, want %v", c.r, got, c.peer)
		}
	}
	if s := Role(9).String(); s != "role(9)" {
		t.Fatalf("an unknown role prints as %q", s)
	}
}

func validHello() Hello {
	return Hello{Version: ProtocolLevel, Mode: MaxMode, Role: RolePublisher, Window: MinWindow, BufferSize: MaxBufferSize, MaxMessage: 1}
}

// FuzzParseHello holds the hello's decoder to its contract: whatever a
// peer sends, it never panics, fails with ErrProtocol or returns a hello
// within the protocol's ranges that marshals back to the same 24 bytes
// (but for the flags byte, which it carries as it is).
func FuzzParseHello(f *testing.F) {
	h := validHello()
	f.Add(h.Marshal())
	f.Add(append(h.Marshal(), make([]byte, AuthTrailer)...))
	f.Add([]byte("NTIO"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHello(b)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("%v is not ErrProtocol", err)
			}
			return
		}
		if h.Window < MinWindow || h.Window > MaxWindow || h.BufferSize < MinBufferSize || h.BufferSize > MaxBufferSize ||
			h.Mode > MaxMode || h.Role > RolePublisher || h.MaxMessage == 0 || h.Version != ProtocolLevel {
			t.Fatalf("%x accepted as %+v, out of range", b, h)
		}
		if m := h.Marshal(); !bytes.Equal(m, b[:HelloSize]) {
			t.Fatalf("%x parsed as %+v, which marshals as %x", b[:HelloSize], h, m)
		}
	})
}

func TestParseHelloRanges(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(b []byte)
	}{
		{"magic", func(b []byte) { b[0] = 'X' }},
		{"level", func(b []byte) { b[4] = ProtocolLevel - 1 }},
		{"mode", func(b []byte) { b[5] = MaxMode + 1 }},
		{"role", func(b []byte) { b[6] = byte(RolePublisher) + 1 }},
		{"window-small", func(b []byte) { binary.LittleEndian.PutUint32(b[8:], MinWindow-1) }},
		{"window-large", func(b []byte) { binary.LittleEndian.PutUint32(b[8:], MaxWindow+1) }},
		{"buffer-small", func(b []byte) { binary.LittleEndian.PutUint32(b[12:], MinBufferSize-1) }},
		{"buffer-large", func(b []byte) { binary.LittleEndian.PutUint32(b[12:], MaxBufferSize+1) }},
		{"no-messages", func(b []byte) { binary.LittleEndian.PutUint64(b[16:], 0) }},
		{"short", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := validHello()
			b := h.Marshal()
			if c.edit == nil {
				b = b[:HelloSize-1]
			} else {
				c.edit(b)
			}
			if _, err := ParseHello(b); !errors.Is(err, ErrProtocol) {
				t.Fatalf("ParseHello: %v, want ErrProtocol", err)
			}
		})
	}
	h := validHello()
	if _, err := ParseHello(h.Marshal()); err != nil {
		t.Fatalf("a valid hello: %v", err)
	}
}
