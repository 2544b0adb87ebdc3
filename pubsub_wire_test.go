package netio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The control messages come from any peer: parsing never panics, accepts
// only what marshal could have made (but for the bytes the format leaves
// zero, which are not looked at), gives back what was marshalled, and
// allocates by the bytes received, never by a count the bytes claim.
func FuzzRequest(f *testing.F) {
	addSeeds(f, requestSeeds())
	f.Fuzz(func(t *testing.T, b []byte) { checkRequest(t, b) })
}

func checkRequest(t *testing.T, b []byte) error {
	r, err := parseRequest(b)
	if err != nil {
		if !errors.Is(err, ErrProtocol) {
			t.Fatalf("%v is not ErrProtocol", err)
		}
		return err
	}
	if len(r.tags) != (len(b)-requestHeader)/8 {
		t.Fatalf("%d bytes parsed as %d tags", len(b), len(r.tags))
	}
	m := r.marshal()
	if !bytes.Equal(m[:5], b[:5]) || !bytes.Equal(m[requestHeader:], b[requestHeader:]) {
		t.Fatalf("request %x parsed as %+v, which marshals as %x", b, r, m)
	}
	again, err := parseRequest(m)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, again, cmp.AllowUnexported(request{})); diff != "" {
		t.Fatalf("round trip (-first +again):\n%s", diff)
	}
	return nil
}

func FuzzAck(f *testing.F) {
	addSeeds(f, ackSeeds())
	f.Fuzz(func(t *testing.T, b []byte) { checkAck(t, b) })
}

func checkAck(t *testing.T, b []byte) error {
	a, err := parseAck(b)
	if err != nil {
		if !errors.Is(err, ErrProtocol) {
			t.Fatalf("%v is not ErrProtocol", err)
		}
		return err
	}
	if len(a.tags) != (len(b)-ackHeader)/ackEntry || len(a.next) != len(a.tags) {
		t.Fatalf("%d bytes parsed as %d tags and %d sequence numbers", len(b), len(a.tags), len(a.next))
	}
	m := a.marshal()
	if !bytes.Equal(m[:4], b[:4]) || !bytes.Equal(m[8:], b[8:]) {
		t.Fatalf("acknowledgement %x parsed as %+v, which marshals as %x", b, a, m)
	}
	again, err := parseAck(m)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, again, cmp.AllowUnexported(ack{})); diff != "" {
		t.Fatalf("round trip (-first +again):\n%s", diff)
	}
	return nil
}

func FuzzFarewell(f *testing.F) {
	addSeeds(f, farewellSeeds())
	f.Fuzz(func(t *testing.T, b []byte) { checkFarewell(t, b) })
}

func checkFarewell(t *testing.T, b []byte) error {
	fw, err := parseFarewell(b)
	if err != nil {
		if !errors.Is(err, ErrProtocol) {
			t.Fatalf("%v is not ErrProtocol", err)
		}
		return err
	}
	if b[0] != farewellVersion {
		if fw.reason != 0 || len(fw.finals) != 0 || !fw.partial {
			t.Fatalf("a farewell of version %d parsed as %+v, want one that lists nothing", b[0], fw)
		}
		return nil
	}
	if len(fw.finals) != (len(b)-farewellHeader)/farewellEntry {
		t.Fatalf("%d bytes parsed as %d entries", len(b), len(fw.finals))
	}
	m := fw.marshal()
	if !bytes.Equal(m[:2], b[:2]) || m[2]&farewellPartial != b[2]&farewellPartial || !bytes.Equal(m[8:], b[8:]) {
		t.Fatalf("farewell %x parsed as %+v, which marshals as %x", b, fw, m)
	}
	return nil
}

func farewellSeeds() []fuzzSeed {
	full := make([]finalSeq, tagsPerFarewell)
	for i := range full {
		full[i] = finalSeq{uint64(i) << 20, uint64(i)}
	}
	valid := (&farewell{reason: farewellSlow, incarnation: 9, finals: []finalSeq{{1, 5}, {7, 0}}}).marshal()
	later := append([]byte{farewellVersion + 1}, valid[1:]...)
	return []fuzzSeed{
		{"two-entries", valid, nil, 0},
		{"closed-empty", (&farewell{reason: farewellClosed, incarnation: 1}).marshal(), nil, 0},
		{"partial-full", (&farewell{reason: farewellClosed, partial: true, finals: full}).marshal(), nil, 0},
		{"later-version", later, nil, 0},
		{"empty", nil, ErrProtocol, 0},
		{"short-header", valid[:farewellHeader-1], ErrProtocol, 0},
		{"entry-cut-short", valid[:len(valid)-1], ErrProtocol, 0},
		{"no-reason", append([]byte{farewellVersion, 0}, valid[2:]...), ErrProtocol, 0},
		{"unknown-reason", append([]byte{farewellVersion, 9}, valid[2:]...), ErrProtocol, 0},
	}
}

// countRecords counts the tagged records that begin in a page: what a
// publisher that gives up on its unsent pages reports undelivered.
func TestCountRecords(t *testing.T) {
	w := taggedPages(false).writer(4096 - headerSize).(*pageWriter)
	page := make([]byte, 4096)
	w.open(page, 0)
	for i := 0; i < 5; i++ {
		w.setRecord(1, uint64(i))
		w.begin(100)
		w.put(make([]byte, 100))
	}
	w.setRecord(1, 5)
	w.begin(10000) // a message larger than the page begins in it
	w.put(make([]byte, 10000))
	n := w.seal()
	h := readHeader(page)
	if got := countRecords(page[headerSize:n], h.msgLen, taggedPrefixSize); got != 6 {
		t.Fatalf("%d records counted, want 6", got)
	}
	// A page that continues a message, then holds two.
	w.open(page, 300)
	w.put(make([]byte, 300))
	for i := 0; i < 2; i++ {
		w.setRecord(2, uint64(i))
		w.begin(8)
		w.put(make([]byte, 8))
	}
	n = w.seal()
	h = readHeader(page)
	if got := countRecords(page[headerSize:n], h.msgLen, taggedPrefixSize); got != 2 {
		t.Fatalf("%d records counted after a continuation, want 2", got)
	}
}

func requestSeeds() []fuzzSeed {
	full := make([]uint64, tagsPerRequest)
	for i := range full {
		full[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	valid := (&request{id: 1, policy: DropOldest, tags: []uint64{1, 2, 1 << 63}}).marshal()
	return []fuzzSeed{
		{"three-tags", valid, nil, 0},
		{"no-tags", (&request{id: 9}).marshal(), nil, 0},
		{"full", (&request{id: 1<<32 - 1, policy: DropNewest, tags: full}).marshal(), nil, 0},
		{"reserved-bytes-set", append([]byte{1, 0, 0, 0, 0, 0xff, 0xff, 0xff}, valid[requestHeader:]...), nil, 0},
		{"empty", nil, ErrProtocol, 0},
		{"short-header", valid[:requestHeader-1], ErrProtocol, 0},
		{"tag-cut-short", valid[:len(valid)-3], ErrProtocol, 0},
		{"unknown-policy", []byte{1, 0, 0, 0, 9, 0, 0, 0}, ErrProtocol, 0},
		{"policy-255", append([]byte{1, 0, 0, 0, 255, 0, 0, 0}, valid[requestHeader:]...), ErrProtocol, 0},
		// The kind, not the payload, tells a request from an acknowledgement.
		{"an-ack", (&ack{id: 1, incarnation: 5, tags: []uint64{3}, next: []uint64{4}}).marshal(), nil, 0},
	}
}

func ackSeeds() []fuzzSeed {
	n := tagsPerAck
	tags, next := make([]uint64, n), make([]uint64, n)
	for i := range tags {
		tags[i], next[i] = uint64(i)<<40, uint64(n-i)
	}
	valid := (&ack{id: 7, incarnation: 1 << 60, tags: []uint64{3, 4}, next: []uint64{0, 99}}).marshal()
	return []fuzzSeed{
		{"two-entries", valid, nil, 0},
		{"no-entries", (&ack{id: 1, incarnation: 1}).marshal(), nil, 0},
		{"refused", (&ack{id: 8, refused: true, incarnation: 5}).marshal(), nil, 0},
		{"full", (&ack{id: 2, incarnation: 1<<64 - 1, tags: tags, next: next}).marshal(), nil, 0},
		{"reserved-bytes-set", append(binary.LittleEndian.AppendUint32([]byte{7, 0, 0, 0}, 0xffffffff), valid[8:]...), nil, 0},
		{"empty", nil, ErrProtocol, 0},
		{"short-header", valid[:ackHeader-1], ErrProtocol, 0},
		{"entry-cut-short", valid[:len(valid)-1], ErrProtocol, 0},
		{"half-entry", valid[:ackHeader+8], ErrProtocol, 0},
		{"a-request", (&request{id: 1, tags: []uint64{1}}).marshal(), nil, 0},
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
			checkSeedCorpus(t, target.name, target.seeds, func(t *testing.T, s fuzzSeed) {
				if err := target.check(t, s.in); errors.Is(err, ErrProtocol) != (s.end != nil) {
					t.Fatalf("parse: %v, want %v", err, s.end)
				}
			})
		})
	}
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
