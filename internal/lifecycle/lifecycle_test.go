package lifecycle

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func TestLifecycleMoves(t *testing.T) {
	all := []State{Connecting, Open, Ended, Draining, Closed}
	allowed := map[[2]State]bool{
		{Connecting, Open}: true, {Connecting, Ended}: true, {Connecting, Closed}: true,
		{Open, Ended}: true, {Open, Draining}: true,
		{Ended, Closed}: true, {Draining, Closed}: true,
	}
	for _, from := range all {
		for _, to := range all {
			l := New()
			l.state = from
			if got := l.Move(to); got != allowed[[2]State{from, to}] {
				t.Errorf("%v -> %v: move = %v", from, to, got)
			}
		}
	}
}

func TestLifecycleEnd(t *testing.T) {
	l := New()
	if !l.Move(Open) || !l.wasOpen {
		t.Fatal("connecting -> open")
	}
	if !l.Accepting() {
		t.Fatal("an open link takes what arrives")
	}
	l.End(io.EOF)
	l.End(errors.New("later"))
	select {
	case <-l.done:
	default:
		t.Fatal("done not closed by end")
	}
	if !l.ended.Load() || l.err != io.EOF {
		t.Fatalf("ended %v err %v: the first reason counts", l.ended.Load(), l.err)
	}
	if l.Accepting() {
		t.Fatal("an ended link takes nothing more")
	}
	l.Move(Ended)
	l.Release()
	if l.state != Closed || l.err != io.EOF {
		t.Fatalf("after release: %v %v", l.state, l.err)
	}
	<-l.released
}

func TestLifecycleDrainThenRelease(t *testing.T) {
	l := New()
	l.Move(Open)
	if !l.Drain(time.Second) || !l.ClosedByOwner() || l.LingerUntil.IsZero() {
		t.Fatal("open -> draining with a deadline")
	}
	if !l.Accepting() {
		t.Fatal("a draining link still takes credits and FIN")
	}
	if l.Drain(time.Second) {
		t.Fatal("draining twice")
	}
	l.Release()
	if !errors.Is(l.err, net.ErrClosed) {
		t.Fatalf("a link closed in order ends with net.ErrClosed, got %v", l.err)
	}
}
