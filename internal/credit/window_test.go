package credit

import (
	"errors"
	"testing"

	"github.com/netio-go/netio/internal/wire"
)

// checkCreditInvariant holds the window's invariants: the credits we hold are
// within the peer's window; the credits the peer holds, those we owe it
// and the buffers it has used that we have not re-posted add up to our
// window; nothing is negative.
func checkCreditInvariant(t *testing.T, step string, w *Window, unposted int) {
	t.Helper()
	switch {
	case w.credits < 0 || w.credits > w.peerWindow:
		t.Fatalf("%s: credits %d outside [0, %d]", step, w.credits, w.peerWindow)
	case w.owed < 0:
		t.Fatalf("%s: owed %d", step, w.owed)
	case w.peerHeld+w.owed+unposted != w.ourWindow:
		t.Fatalf("%s: peer holds %d, we owe %d, %d unposted: not our window of %d", step, w.peerHeld, w.owed, unposted, w.ourWindow)
	}
}

func TestCreditWindowDataLeavesReserve(t *testing.T) {
	for _, window := range []int{2, 4, 16} {
		var w Window
		w.Reset(window, 8)
		sent := 0
		for {
			if _, ok := w.Take(Data); !ok {
				break
			}
			sent++
			checkCreditInvariant(t, "data send", &w, 0)
		}
		if want := window - reserveForControl; sent != want {
			t.Errorf("window %d: %d data sends, want %d (one credit kept back)", window, sent, want)
		}
		if !w.CanTake(Control) {
			t.Errorf("window %d: no credit left for a control message after the data", window)
		}
		if _, ok := w.Take(Control); !ok {
			t.Errorf("window %d: control send refused with the reserve in hand", window)
		}
		if _, ok := w.Take(Control); ok {
			t.Errorf("window %d: a send with no credit at all", window)
		}
		checkCreditInvariant(t, "after control", &w, 0)
	}
}

// The steps of a connection's life as the reactor sees them, with what
// each must do to the window.
func TestCreditWindowSequences(t *testing.T) {
	type step struct {
		op      string // take, control, undo, used, repost, give
		n       int
		wantOK  bool   // take/control: allowed; give: no error
		wantGiv uint16 // take/control: credits the header carries
	}
	tests := []struct {
		name       string
		peer, ours int
		steps      []step
	}{
		{"credits ride on data", 4, 4, []step{
			{op: "used", n: 2}, {op: "repost", n: 2},
			{op: "take", wantOK: true, wantGiv: 2},
			{op: "take", wantOK: true, wantGiv: 0},
		}},
		{"a send not posted gives its credits back", 4, 4, []step{
			{op: "used", n: 3}, {op: "repost", n: 3},
			{op: "take", wantOK: true, wantGiv: 3},
			{op: "undo", n: 3},
			{op: "take", wantOK: true, wantGiv: 3},
		}},
		{"returned credits reopen the window", 3, 4, []step{
			{op: "take", wantOK: true}, {op: "take", wantOK: true},
			{op: "take", wantOK: false},
			{op: "give", n: 2, wantOK: true},
			{op: "take", wantOK: true}, {op: "take", wantOK: true},
			{op: "take", wantOK: false},
		}},
		{"a peer returning more than its window is refused", 4, 4, []step{
			{op: "take", wantOK: true},
			{op: "give", n: 2, wantOK: false},
			{op: "give", n: 1, wantOK: true},
		}},
		{"control messages use the reserve", 2, 4, []step{
			{op: "take", wantOK: true},
			{op: "take", wantOK: false},
			{op: "used", n: 4}, {op: "repost", n: 4},
			{op: "control", wantOK: true, wantGiv: 4},
			{op: "control", wantOK: false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w Window
			w.Reset(tt.peer, tt.ours)
			unposted := 0
			for i, s := range tt.steps {
				name := s.op
				switch s.op {
				case "take", "control":
					k := Data
					if s.op == "control" {
						k = Control
					}
					give, ok := w.Take(k)
					if ok != s.wantOK || ok && give != s.wantGiv {
						t.Fatalf("step %d %s: (%d, %v), want (%d, %v)", i, s.op, give, ok, s.wantGiv, s.wantOK)
					}
				case "undo":
					w.Undo(uint16(s.n))
				case "used":
					for j := 0; j < s.n; j++ {
						w.Used()
					}
					unposted += s.n
				case "repost":
					w.Owe(s.n)
					unposted -= s.n
				case "give":
					err := w.Give(uint16(s.n))
					if (err == nil) != s.wantOK {
						t.Fatalf("step %d give %d: %v", i, s.n, err)
					}
					if err != nil && !errors.Is(err, wire.ErrProtocol) {
						t.Fatalf("step %d: %v is not wire.ErrProtocol", i, err)
					}
				}
				checkCreditInvariant(t, name, &w, unposted)
			}
		})
	}
}

func TestCreditWindowReturnable(t *testing.T) {
	var w Window
	w.Reset(4, 8)
	if w.Returnable() {
		t.Fatal("returnable with nothing owed")
	}
	w.Used()
	w.Owe(1)
	if w.Returnable() {
		t.Fatal("one credit of eight owed, peer not starved: not worth a message")
	}
	for i := 0; i < 3; i++ {
		w.Used()
		w.Owe(1)
	}
	if !w.Returnable() {
		t.Fatal("half the window owed: a credit message is due")
	}
	// The peer down to its reserve needs it at once, even for one credit.
	w.Reset(4, 8)
	for i := 0; i < 7; i++ {
		w.Used()
	}
	if !w.PeerStarved() {
		t.Fatal("peer holds one credit: starved")
	}
	w.Owe(1)
	if !w.Returnable() {
		t.Fatal("a starved peer gets what is owed at once")
	}
	// One credit owed for the peer's own credit message: returned only
	// to a peer left with none, by a side that keeps a credit after it.
	w.Reset(4, 4)
	for w.CanTake(Data) {
		w.Take(Data) // down to our reserve
	}
	for i := 0; i < 3; i++ {
		w.Used() // the peer's data, held by our reader
	}
	w.Used() // its credit message, on its last credit
	w.Quietly()
	w.Owe(1)
	if w.Returnable() {
		t.Fatal("returned on our last credit, the peer would answer in kind: not returnable")
	}
	if err := w.Give(1); err != nil {
		t.Fatal(err)
	}
	if !w.Returnable() {
		t.Fatal("the peer has no credit left and we have two: its credit message's credit goes back")
	}
	// No credit to send it with: not returnable, whatever is owed.
	for w.CanTake(Control) {
		w.Take(Control)
	}
	w.Owe(4)
	if w.Returnable() {
		t.Fatal("returnable without a credit to send it")
	}
}

// Two sides that each hold every buffer the other filled (neither reads)
// are down to their reserve. A control message from one (a heartbeat,
// FIN) must cause a few credit messages at most, not an exchange that
// never ends: each credit message costs the other side a buffer, which it
// owes back.
func TestCreditWindowNoEndlessReturns(t *testing.T) {
	type side struct {
		w     Window
		inbox []bool // messages arriving: true for a credit message
	}
	var sides [2]side
	for i := range sides {
		sides[i].w.Reset(4, 4)
	}
	for i := range sides {
		for { // the peer's reader holds whatever this side sends
			if _, ok := sides[i].w.Take(Data); !ok {
				break
			}
			sides[1-i].w.Used()
		}
	}
	send := func(from int, credit bool) {
		give, ok := sides[from].w.Take(Control)
		if !ok {
			t.Fatalf("side %d: no credit for a control message", from)
		}
		to := &sides[1-from]
		if err := to.w.Give(give); err != nil {
			t.Fatal(err)
		}
		to.inbox = append(to.inbox, credit)
	}
	send(0, false) // a heartbeat on the last credit
	messages := 0
	for busy := true; busy; {
		busy = false
		for i := range sides {
			s := &sides[i]
			for _, credit := range s.inbox {
				s.w.Used()
				if credit {
					s.w.Quietly()
				}
				s.w.Owe(1) // re-posted at once: no reader involved
				busy = true
			}
			s.inbox = s.inbox[:0]
			if s.w.Returnable() {
				send(i, true)
				busy = true
				if messages++; messages > 10 {
					t.Fatalf("more than %d credit messages for one heartbeat: %+v, %+v", messages-1, sides[0].w, sides[1].w)
				}
			}
		}
	}
	// Each side can still send a control message, or will once the
	// other's next header comes: nothing is stuck for good.
	for i := range sides {
		w := &sides[i].w
		if !w.CanTake(Control) && !sides[1-i].w.Owing() {
			t.Errorf("side %d has no credit and is owed none: %+v", i, *w)
		}
	}
}
