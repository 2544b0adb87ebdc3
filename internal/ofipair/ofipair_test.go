//go:build cgo && linux

package ofipair

import (
	"bytes"
	"testing"
	"time"

	"github.com/netio-go/netio/internal/leakcheck"
	"github.com/netio-go/netio/ofi"
)

// TestMain fails the package if a Pair's Close leaves a descriptor or a
// goroutine behind.
func TestMain(m *testing.M) { leakcheck.Main(m) }

// hang bounds a wait for completions: a guard against a hang, not a speed
// limit.
const hang = 20 * time.Second

// New connects a pair that carries each side's private data and a message
// from the client into the receive the server posted before accepting.
func TestPairCarriesAMessage(t *testing.T) {
	recv := []ofi.Segment{{Offset: 512, Len: 512, Token: 7}}
	p, err := New(Options{RegionSize: 4096, ServerRecv: recv, ClientData: []byte("req"), ServerData: []byte("acc")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if string(p.ClientData) != "req" || string(p.ServerData) != "acc" {
		t.Fatalf("private data: the server got %q, the client %q", p.ClientData, p.ServerData)
	}
	if !p.ServerAddr.IsValid() || p.ServerAddr.Port() == 0 {
		t.Fatalf("server address %v: want the bound port", p.ServerAddr)
	}
	msg := []byte("across a bare pair")
	copy(p.Client.Region.Bytes(), msg)
	send := []ofi.Segment{{Len: uint64(len(msg)), Token: 3}}
	if n, err := p.Client.Endpoint.PostSend(p.Client.Region, send); n != 1 || err != nil {
		t.Fatalf("PostSend: %d, %v", n, err)
	}
	var c [4]ofi.Completion
	if _, err := p.Client.Poll(c[:], 1, hang); err != nil {
		t.Fatal("the client's send:", err)
	}
	if c[0].Token != 3 {
		t.Fatalf("the client's completion has token %d, want 3", c[0].Token)
	}
	if _, err := p.Server.Poll(c[:], 1, hang); err != nil {
		t.Fatal("the server's receive:", err)
	}
	if c[0].Token != 7 || int(c[0].Len) != len(msg) {
		t.Fatalf("the server's completion: token %d, %d bytes; want 7, %d", c[0].Token, c[0].Len, len(msg))
	}
	if got := p.Server.Region.Bytes()[512 : 512+len(msg)]; !bytes.Equal(got, msg) {
		t.Fatalf("received %q, want %q", got, msg)
	}
}
