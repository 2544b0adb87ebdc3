package netio

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The control messages come from any peer: parsing never panics, accepts
// only what marshal could have made, and gives back what was marshalled.
func FuzzRequest(f *testing.F) {
	f.Add((&request{id: 1, policy: DropOldest, tags: []uint64{1, 2, 1 << 63}}).marshal())
	f.Add([]byte{})
	f.Add(make([]byte, requestHeader+3))
	f.Add([]byte{1, 0, 0, 0, 9, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseRequest(b)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("%v is not ErrProtocol", err)
			}
			return
		}
		again, err := parseRequest(r.marshal())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(r, again, cmp.AllowUnexported(request{})); diff != "" {
			t.Fatalf("round trip (-first +again):\n%s", diff)
		}
	})
}

func FuzzAck(f *testing.F) {
	f.Add((&ack{id: 7, incarnation: 1 << 60, tags: []uint64{3, 4}, next: []uint64{0, 99}}).marshal())
	f.Add([]byte{})
	f.Add((&ack{id: 8, refused: true, incarnation: 5}).marshal())
	f.Add(make([]byte, ackHeader+ackEntry-1))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := parseAck(b)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("%v is not ErrProtocol", err)
			}
			return
		}
		again, err := parseAck(a.marshal())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a, again, cmp.AllowUnexported(ack{})); diff != "" {
			t.Fatalf("round trip (-first +again):\n%s", diff)
		}
	})
}

func TestRequestLimits(t *testing.T) {
	tags := make([]uint64, tagsPerRequest)
	if n := len((&request{tags: tags}).marshal()); n > ctlPayloadMax {
		t.Fatalf("a full request is %d bytes, more than a control message's %d", n, ctlPayloadMax)
	}
	if n := len((&ack{tags: tags[:tagsPerAck], next: tags[:tagsPerAck]}).marshal()); n > ctlPayloadMax {
		t.Fatalf("a full ack is %d bytes, more than a control message's %d", n, ctlPayloadMax)
	}
}
