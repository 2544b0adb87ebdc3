package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/netio-go/netio/internal/seedcorpus"
)

// The control messages come from any peer: parsing never panics, accepts
// only what Marshal could have made (but for the bytes the format leaves
// zero, which are not looked at), gives back what was marshalled, and
// allocates by the bytes received, never by a count the bytes claim.
func FuzzRequest(f *testing.F) {
	seedcorpus.Add(f, corpus(requestSeeds()))
	f.Fuzz(func(t *testing.T, b []byte) { checkRequest(t, b) })
}

func checkRequest(t *testing.T, b []byte) error {
	r, err := ParseRequest(b)
	if err != nil {
		if !errors.Is(err, ErrProtocol) {
			t.Fatalf("%v is not ErrProtocol", err)
		}
		return err
	}
	if len(r.Tags) != (len(b)-RequestHeader)/8 {
		t.Fatalf("%d bytes parsed as %d tags", len(b), len(r.Tags))
	}
	m := r.Marshal()
	if !bytes.Equal(m[:5], b[:5]) || !bytes.Equal(m[RequestHeader:], b[RequestHeader:]) {
		t.Fatalf("request %x parsed as %+v, which marshals as %x", b, r, m)
	}
	again, err := ParseRequest(m)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, again); diff != "" {
		t.Fatalf("round trip (-first +again):\n%s", diff)
	}
	return nil
}

func FuzzAck(f *testing.F) {
	seedcorpus.Add(f, corpus(ackSeeds()))
	f.Fuzz(func(t *testing.T, b []byte) { checkAck(t, b) })
}

func checkAck(t *testing.T, b []byte) error {
	a, err := ParseAck(b)
	if err != nil {
		if !errors.Is(err, ErrProtocol) {
			t.Fatalf("%v is not ErrProtocol", err)
		}
		return err
	}
	if len(a.Tags) != (len(b)-AckHeader)/AckEntry || len(a.Next) != len(a.Tags) {
		t.Fatalf("%d bytes parsed as %d tags and %d sequence numbers", len(b), len(a.Tags), len(a.Next))
	}
	m := a.Marshal()
	if !bytes.Equal(m[:4], b[:4]) || !bytes.Equal(m[8:], b[8:]) {
		t.Fatalf("acknowledgement %x parsed as %+v, which marshals as %x", b, a, m)
	}
	again, err := ParseAck(m)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, again); diff != "" {
		t.Fatalf("round trip (-first +again):\n%s", diff)
	}
	return nil
}

func FuzzFarewell(f *testing.F) {
	seedcorpus.Add(f, corpus(farewellSeeds()))
	f.Fuzz(func(t *testing.T, b []byte) { checkFarewell(t, b) })
}

func checkFarewell(t *testing.T, b []byte) error {
	fw, err := ParseFarewell(b)
	if err != nil {
		if !errors.Is(err, ErrProtocol) {
			t.Fatalf("%v is not ErrProtocol", err)
		}
		return err
	}
	if b[0] != FarewellVersion {
		if fw.Reason != 0 || len(fw.Finals) != 0 || !fw.Partial {
			t.Fatalf("a farewell of version %d parsed as %+v, want one that lists nothing", b[0], fw)
		}
		return nil
	}
	if len(fw.Finals) != (len(b)-FarewellHeader)/FarewellEntry {
		t.Fatalf("%d bytes parsed as %d entries", len(b), len(fw.Finals))
	}
	m := fw.Marshal()
	if !bytes.Equal(m[:2], b[:2]) || m[2]&FarewellPartial != b[2]&FarewellPartial || !bytes.Equal(m[8:], b[8:]) {
		t.Fatalf("farewell %x parsed as %+v, which marshals as %x", b, fw, m)
	}
	return nil
}

func farewellSeeds() []fuzzSeed {
	full := make([]FinalSeq, TagsPerFarewell)
	for i := range full {
		full[i] = FinalSeq{uint64(i) << 20, uint64(i)}
	}
	valid := (&Farewell{Reason: FarewellSlow, Incarnation: 9, Finals: []FinalSeq{{1, 5}, {7, 0}}}).Marshal()
	later := append([]byte{FarewellVersion + 1}, valid[1:]...)
	return []fuzzSeed{
		{"two-entries", valid, nil},
		{"closed-empty", (&Farewell{Reason: FarewellClosed, Incarnation: 1}).Marshal(), nil},
		{"partial-full", (&Farewell{Reason: FarewellClosed, Partial: true, Finals: full}).Marshal(), nil},
		{"later-version", later, nil},
		{"empty", nil, ErrProtocol},
		{"short-header", valid[:FarewellHeader-1], ErrProtocol},
		{"entry-cut-short", valid[:len(valid)-1], ErrProtocol},
		{"no-reason", append([]byte{FarewellVersion, 0}, valid[2:]...), ErrProtocol},
		{"unknown-reason", append([]byte{FarewellVersion, 9}, valid[2:]...), ErrProtocol},
	}
}

// fuzzSeed is one named input of a seed corpus and how it ends.
type fuzzSeed struct {
	name string
	in   []byte
	end  error
}

func corpus(seeds []fuzzSeed) []seedcorpus.Seed {
	out := make([]seedcorpus.Seed, len(seeds))
	for i, s := range seeds {
		out[i] = seedcorpus.Seed{Name: s.name, In: s.in, End: s.end}
	}
	return out
}

const (
	dropOldest = 1 // netio's DropOldest
	dropNewest = 2 // and DropNewest, MaxPolicy
)

func requestSeeds() []fuzzSeed {
	full := make([]uint64, TagsPerRequest)
	for i := range full {
		full[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	valid := (&Request{ID: 1, Policy: dropOldest, Tags: []uint64{1, 2, 1 << 63}}).Marshal()
	return []fuzzSeed{
		{"three-tags", valid, nil},
		{"no-tags", (&Request{ID: 9}).Marshal(), nil},
		{"full", (&Request{ID: 1<<32 - 1, Policy: dropNewest, Tags: full}).Marshal(), nil},
		{"reserved-bytes-set", append([]byte{1, 0, 0, 0, 0, 0xff, 0xff, 0xff}, valid[RequestHeader:]...), nil},
		{"empty", nil, ErrProtocol},
		{"short-header", valid[:RequestHeader-1], ErrProtocol},
		{"tag-cut-short", valid[:len(valid)-3], ErrProtocol},
		{"unknown-policy", []byte{1, 0, 0, 0, 9, 0, 0, 0}, ErrProtocol},
		{"policy-255", append([]byte{1, 0, 0, 0, 255, 0, 0, 0}, valid[RequestHeader:]...), ErrProtocol},
		// The kind, not the payload, tells a request from an acknowledgement.
		{"an-ack", (&Ack{ID: 1, Incarnation: 5, Tags: []uint64{3}, Next: []uint64{4}}).Marshal(), nil},
	}
}

func ackSeeds() []fuzzSeed {
	n := TagsPerAck
	tags, next := make([]uint64, n), make([]uint64, n)
	for i := range tags {
		tags[i], next[i] = uint64(i)<<40, uint64(n-i)
	}
	valid := (&Ack{ID: 7, Incarnation: 1 << 60, Tags: []uint64{3, 4}, Next: []uint64{0, 99}}).Marshal()
	return []fuzzSeed{
		{"two-entries", valid, nil},
		{"no-entries", (&Ack{ID: 1, Incarnation: 1}).Marshal(), nil},
		{"refused", (&Ack{ID: 8, Refused: true, Incarnation: 5}).Marshal(), nil},
		{"full", (&Ack{ID: 2, Incarnation: 1<<64 - 1, Tags: tags, Next: next}).Marshal(), nil},
		{"reserved-bytes-set", append(binary.LittleEndian.AppendUint32([]byte{7, 0, 0, 0}, 0xffffffff), valid[8:]...), nil},
		{"empty", nil, ErrProtocol},
		{"short-header", valid[:AckHeader-1], ErrProtocol},
		{"entry-cut-short", valid[:len(valid)-1], ErrProtocol},
		{"half-entry", valid[:AckHeader+8], ErrProtocol},
		{"a-request", (&Request{ID: 1, Tags: []uint64{1}}).Marshal(), nil},
	}
}

func TestControlSeeds(t *testing.T) {
	for _, target := range []struct {
		name  string
		seeds []fuzzSeed
		check func(*testing.T, []byte) error
	}{
		{"FuzzRequest", requestSeeds(), checkRequest},
		{"FuzzAck", ackSeeds(), checkAck},
		{"FuzzFarewell", farewellSeeds(), checkFarewell},
	} {
		t.Run(target.name, func(t *testing.T) {
			seedcorpus.Check(t, target.name, corpus(target.seeds), func(t *testing.T, s seedcorpus.Seed) {
				if err := target.check(t, s.In); errors.Is(err, ErrProtocol) != (s.End != nil) {
					t.Fatalf("parse: %v, want %v", err, s.End)
				}
			})
		})
	}
}

func TestRequestLimits(t *testing.T) {
	tags := make([]uint64, TagsPerRequest)
	if n := len((&Request{Tags: tags}).Marshal()); n > ControlPayloadMax {
		t.Fatalf("a full request is %d bytes, more than a control message's %d", n, ControlPayloadMax)
	}
	if n := len((&Ack{Tags: tags[:TagsPerAck], Next: tags[:TagsPerAck]}).Marshal()); n > ControlPayloadMax {
		t.Fatalf("a full ack is %d bytes, more than a control message's %d", n, ControlPayloadMax)
	}
	if n := len((&Farewell{Finals: make([]FinalSeq, TagsPerFarewell)}).Marshal()); n > ControlPayloadMax {
		t.Fatalf("a full farewell is %d bytes, more than a control message's %d", n, ControlPayloadMax)
	}
}
