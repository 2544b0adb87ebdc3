//go:build cgo && linux

package ofi_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/netio-go/netio/internal/ofipair"
	"github.com/netio-go/netio/ofi"
)

// verbsPair connects a pair on tcp under the verbs profile.
func verbsPair(t *testing.T, o ofipair.Options) *ofipair.Pair {
	t.Helper()
	t.Cleanup(ofi.UseProfile("verbs"))
	p, err := ofipair.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if got := p.Client.Info.Profile(); got != "verbs" {
		t.Fatalf("profile %q, want verbs", got)
	}
	return p
}

// wantProfileError checks that err is the profile's refusal errno, saying
// what was wrong.
func wantProfileError(t *testing.T, what string, err error, errno ofi.Errno, says string) {
	t.Helper()
	var pe *ofi.ProfileError
	if !errors.As(err, &pe) || !errors.Is(err, errno) || !strings.Contains(err.Error(), says) {
		t.Errorf("%s: %v, want a *ProfileError wrapping %v that says %q", what, err, errno, says)
	}
}

// Under the profile the entry reports verbs' registration mode and
// limits, so that callers take the path they take on verbs.
func TestProfileInfo(t *testing.T) {
	defer ofi.UseProfile("verbs")()
	l, err := ofi.GetInfo(ofi.Hints{Provider: "tcp", Node: "127.0.0.1", Service: "0", Source: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Free()
	i := l.Entries[0]
	if !i.NeedsRegistration() || !i.ProviderKeys() || !i.PinsMemory() {
		t.Errorf("mr_mode %#x: want FI_MR_LOCAL and FI_MR_PROV_KEY, as verbs", i.MRMode())
	}
	if i.TxSize() > 384 || i.RxSize() > 384 || i.InjectSize() > 64 {
		t.Errorf("tx %d rx %d inject %d: want verbs' 384, 384, 64 at most", i.TxSize(), i.RxSize(), i.InjectSize())
	}
}

// A post whose descriptor is wrong fails in the call, as verbs would fail
// it with a protection error: a buffer outside the region its descriptor
// names, and a region no longer registered.
func TestProfileWrongDescriptor(t *testing.T) {
	p := verbsPair(t, ofipair.Options{ServerRecv: []ofi.Segment{{Offset: 0, Len: 4096, Token: 1}}})
	other, err := p.Client.Domain.NewRegion(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ofi.SwapDescriptors(p.Client.Region, other)
	n, err := p.Client.Endpoint.PostSend(p.Client.Region, []ofi.Segment{{Offset: 0, Len: 100, Token: 7}})
	ofi.SwapDescriptors(p.Client.Region, other)
	if n != 0 {
		t.Errorf("%d posted with another region's descriptor", n)
	}
	wantProfileError(t, "send with another region's descriptor", err, ofi.EBADDESC, "not inside the region its descriptor belongs to")

	if err := other.Deregister(); err != nil {
		t.Fatal(err)
	}
	_, err = p.Client.Endpoint.PostSend(other, []ofi.Segment{{Offset: 0, Len: 100, Token: 9}})
	wantProfileError(t, "send from a deregistered region", err, ofi.EBADDESC, "without a memory descriptor")

	err = p.Client.Endpoint.PostSendTail(p.Client.Region, ofi.Segment{Offset: 0, Len: 16, Token: 10}, []byte("from the caller's memory"))
	wantProfileError(t, "send of a tail from unregistered memory", err, ofi.EBADDESC, "no registered region")
}

// Posting past a queue's depth fails with EAGAIN, as on verbs (tcp would
// take it), and says which queue was full; what fitted was posted.
func TestProfileOverDeepPost(t *testing.T) {
	p := verbsPair(t, ofipair.Options{})
	rx, tx := p.Client.Info.RxSize(), p.Client.Info.TxSize()
	segs := make([]ofi.Segment, max(rx, tx)+1)
	for i := range segs {
		segs[i] = ofi.Segment{Offset: uint64(i * 64), Len: 64, Token: uint64(i)}
	}
	n, err := p.Client.Endpoint.PostRecv(p.Client.Region, segs[:rx+1])
	if n != rx {
		t.Errorf("%d of %d receives posted on a queue of %d", n, rx+1, rx)
	}
	wantProfileError(t, "one receive past the queue's depth", err, ofi.EAGAIN, "receive queue full")

	n, err = p.Client.Endpoint.PostSend(p.Client.Region, segs[:tx+1])
	if n != tx {
		t.Errorf("%d of %d sends posted on a queue of %d", n, tx+1, tx)
	}
	wantProfileError(t, "one send past the queue's depth", err, ofi.EAGAIN, "transmit queue full")
}

// A message that arrives when every posted receive is taken fails the
// receiver's queue with ENORECV (as iWARP ends the connection; InfiniBand
// and RoCE would make the sender retry for ever): the trap of a sender
// that does not keep to its credits.
func TestProfileNoReceivePosted(t *testing.T) {
	p := verbsPair(t, ofipair.Options{ServerRecv: []ofi.Segment{{Offset: 0, Len: 4096, Token: 1}}})
	sends := []ofi.Segment{{Offset: 0, Len: 100, Token: 10}, {Offset: 4096, Len: 100, Token: 11}}
	if n, err := p.Client.Endpoint.PostSend(p.Client.Region, sends); n != 2 || err != nil {
		t.Fatalf("PostSend: %d, %v", n, err)
	}
	buf := make([]ofi.Completion, 4)
	n, err := p.Server.Poll(buf, 2, hangTimeout)
	if n != 1 || buf[0].Token != 1 {
		t.Errorf("%d completions (first token %d), want the posted receive's", n, buf[0].Token)
	}
	var ce *ofi.CompletionError
	if !errors.As(err, &ce) || ce.Token != ofi.ProfileTrapToken || !errors.Is(err, ofi.ENORECV) || !strings.Contains(err.Error(), "no receive posted") {
		t.Errorf("second message with no receive posted: %v, want the trap's ENORECV", err)
	}
}

// Connection data past verbs' 55 bytes is refused before it is sent.
func TestProfileConnectionData(t *testing.T) {
	t.Cleanup(ofi.UseProfile("verbs"))
	_, err := ofipair.New(ofipair.Options{ClientData: make([]byte, 56)})
	wantProfileError(t, "56 bytes of connection data", err, ofi.EINVAL, "over the 55 verbs carries")
	p := verbsPair(t, ofipair.Options{ClientData: make([]byte, 55), ServerData: make([]byte, 55)})
	if len(p.ClientData) != 55 || len(p.ServerData) != 55 {
		t.Errorf("55 bytes each way: got %d and %d", len(p.ClientData), len(p.ServerData))
	}
}

// Without the profile the limit is what the provider answers to
// FI_OPT_CM_DATA_SIZE (256 bytes on tcp 1.17): more is refused before it
// is sent, with the limit named.
func TestConnectionDataSize(t *testing.T) {
	p, err := ofipair.New(ofipair.Options{ClientData: make([]byte, 256)})
	if err != nil {
		t.Fatal(err)
	}
	n := p.Client.Endpoint.CMDataSize()
	p.Close()
	if n != 256 || len(p.ClientData) != 256 {
		t.Errorf("tcp: limit %d, %d bytes arrived; want 256 and 256", n, len(p.ClientData))
	}
	_, err = ofipair.New(ofipair.Options{ClientData: make([]byte, 257)})
	if !errors.Is(err, ofi.EINVAL) || !strings.Contains(err.Error(), "over the provider's 256 (FI_OPT_CM_DATA_SIZE)") {
		t.Errorf("257 bytes of connection data: %v, want EINVAL naming the provider's 256", err)
	}
}
