package netio

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func TestLifecycleMoves(t *testing.T) {
	all := []linkState{linkConnecting, linkOpen, linkEnded, linkDraining, linkClosed}
	allowed := map[[2]linkState]bool{
		{linkConnecting, linkOpen}: true, {linkConnecting, linkEnded}: true, {linkConnecting, linkClosed}: true,
		{linkOpen, linkEnded}: true, {linkOpen, linkDraining}: true,
		{linkEnded, linkClosed}: true, {linkDraining, linkClosed}: true,
	}
	for _, from := range all {
		for _, to := range all {
			l := newLifecycle()
			l.state = from
			if got := l.move(to); got != allowed[[2]linkState{from, to}] {
				t.Errorf("%v -> %v: move = %v", from, to, got)
			}
		}
	}
}

func TestLifecycleEnd(t *testing.T) {
	l := newLifecycle()
	if !l.move(linkOpen) || !l.wasOpen {
		t.Fatal("connecting -> open")
	}
	if !l.accepting() {
		t.Fatal("an open link takes what arrives")
	}
	l.end(io.EOF)
	l.end(errors.New("later"))
	select {
	case <-l.done:
	default:
		t.Fatal("done not closed by end")
	}
	if !l.ended.Load() || l.err != io.EOF {
		t.Fatalf("ended %v err %v: the first reason counts", l.ended.Load(), l.err)
	}
	if l.accepting() {
		t.Fatal("an ended link takes nothing more")
	}
	l.move(linkEnded)
	l.release()
	if l.state != linkClosed || l.err != io.EOF {
		t.Fatalf("after release: %v %v", l.state, l.err)
	}
	<-l.released
}

func TestLifecycleDrainThenRelease(t *testing.T) {
	l := newLifecycle()
	l.move(linkOpen)
	if !l.drain(time.Second) || !l.closedByOwner() || l.lingerUntil.IsZero() {
		t.Fatal("open -> draining with a deadline")
	}
	if !l.accepting() {
		t.Fatal("a draining link still takes credits and FIN")
	}
	if l.drain(time.Second) {
		t.Fatal("draining twice")
	}
	l.release()
	if !errors.Is(l.err, net.ErrClosed) {
		t.Fatalf("a link closed in order ends with net.ErrClosed, got %v", l.err)
	}
}
