package netio

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// The writing side of a Conn. The writer fills send buffers in its own
// goroutine, under wmu, and publishes them by advancing txHead; the reactor
// posts what the peer's credits allow and advances txDone as sends
// complete. In LowLatency mode every message (fragment) is a buffer of its
// own; in HighThroughput mode buffers are pages that many messages share,
// and the reactor is told only when a page opens or is sealed.

// Write sends p as one message. In LowLatency mode it goes out at once; in
// HighThroughput mode it is copied into the current page, which goes out
// when full, on Flush, when the writer pauses or after
// Config.FlushInterval. Write blocks while every send buffer is in flight
// (the peer is not reading), until the write deadline. A message above
// the maximum size fails with ErrMessageTooLarge; a deadline that passes
// half-way through a message larger than a buffer leaves the write side
// unusable, as a message cannot be taken back.
func (c *Conn) Write(p []byte) (int, error) {
	if c.ht {
		c.wmu.Lock()
		if c.appendToPage(p) {
			c.wmu.Unlock()
			return len(p), nil
		}
		c.wmu.Unlock()
	}
	return c.write(nil, p, false)
}

// appendToPage is the common case of a HighThroughput write, a message
// that fits the open page: it touches nothing shared but the lock (no
// deadline, no reactor). It reports false, writing nothing, otherwise.
// Under wmu.
func (c *Conn) appendToPage(p []byte) bool {
	if !c.wOpen || c.pw.room() < 2*prefixSize+len(p) || c.wdl.Load() != 0 ||
		c.closed.Load() || c.ended.Load() || c.werr != nil || len(p) > c.maxSend {
		return false
	}
	c.pw.putPrefix(len(p))
	c.pw.put(p)
	c.wMsgs++
	c.wBytes += uint64(len(p))
	return true
}

// WriteBatch writes each element of msgs as one message, as Write would
// one by one, and returns how many it wrote. Taking the connection's write
// lock once per batch instead of once per message makes it the cheapest
// way to write small messages in HighThroughput mode. On an error the
// messages before the failed one were written.
func (c *Conn) WriteBatch(msgs [][]byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for i, p := range msgs {
		if c.ht && c.appendToPage(p) {
			continue
		}
		if _, err := c.writeLocked(nil, p, false); err != nil {
			return i, err
		}
	}
	return len(msgs), nil
}

// WriteContext is Write bounded by ctx as well as by the write deadline.
func (c *Conn) WriteContext(ctx context.Context, p []byte) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, c.opError("write", err)
	}
	return c.write(ctx, p, false)
}

// TryWrite is Write that never waits: when the message does not fit in the
// free send buffers, or another Write holds them, it sends nothing and
// returns an error that errors.Is ErrWouldBlock.
func (c *Conn) TryWrite(p []byte) (int, error) { return c.write(nil, p, true) }

// Flush sends the current page of a HighThroughput connection now, without
// waiting for it to fill. It does not wait for the page to be delivered.
// On a LowLatency connection it does nothing: every Write is sent at once.
func (c *Conn) Flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.writable(0); err != nil {
		return err
	}
	if c.wOpen {
		c.seal(flushExplicit)
		c.kick()
	}
	return nil
}

func (c *Conn) write(ctx context.Context, p []byte, try bool) (int, error) {
	if !try {
		c.wmu.Lock()
	} else if !c.wmu.TryLock() {
		return 0, c.opError("write", ErrWouldBlock)
	}
	defer c.wmu.Unlock()
	return c.writeLocked(ctx, p, try)
}

func (c *Conn) writeLocked(ctx context.Context, p []byte, try bool) (int, error) {
	if err := c.writable(len(p)); err != nil {
		return 0, err
	}
	if try && !c.fits(len(p)) {
		return 0, c.opError("write", ErrWouldBlock)
	}
	if c.ht {
		return c.writePage(ctx, p)
	}
	return c.writeFragments(ctx, p)
}

// writable checks, before a write of n bytes, for Close, deadline, a dead
// connection and the size limit.
func (c *Conn) writable(n int) error {
	switch {
	case c.closed.Load():
		return c.opError("write", net.ErrClosed)
	case expired(&c.wdl):
		return c.opError("write", os.ErrDeadlineExceeded)
	case c.ended.Load():
		return c.writeDeadErr()
	case c.werr != nil:
		return c.werr
	case n > c.maxSend:
		return c.opError("write", ErrMessageTooLarge)
	}
	return nil
}

// fits reports whether n bytes can be written without waiting.
func (c *Conn) fits(n int) bool {
	slots := uint64(c.txSlots)
	free := int(slots - (c.txHead.Load() - c.txDone.Load()))
	if !c.ht {
		return free >= max(1, (n+c.payloadMax-1)/c.payloadMax)
	}
	need := prefixSize + n
	if c.wOpen {
		free-- // the open page's buffer
		room := c.pw.room()
		if need <= room {
			return true
		}
		if need > c.payloadMax {
			need -= room // a large message starts in the open page
		}
	}
	return free >= (need+c.payloadMax-1)/c.payloadMax
}

// writeFragments sends p as LowLatency fragments, one send buffer each.
func (c *Conn) writeFragments(ctx context.Context, p []byte) (int, error) {
	slots := uint64(c.txSlots)
	head := c.txHead.Load()
	off := 0
	for {
		if head-c.txDone.Load() >= slots {
			if err := c.waitWritable(ctx, head); err != nil {
				if off > 0 {
					c.werr = err
				}
				return off, err
			}
		}
		n := min(len(p)-off, c.payloadMax)
		h := header{kind: kindData, fragLen: uint32(n), msgLen: uint64(len(p))}
		if off+n == len(p) {
			h.flags = flagLast
		}
		slot := int(head % slots)
		b := c.txMem[slot*c.txBufSize:]
		putHeader(b, h)
		copy(b[headerSize:], p[off:off+n])
		c.txLen[slot] = uint32(headerSize + n)
		head++
		c.txHead.Store(head)
		c.kick()
		off += n
		if off == len(p) {
			c.wMsgs++
			c.wBytes += uint64(len(p))
			c.stats.messagesSent.Store(c.wMsgs)
			c.stats.bytesSent.Store(c.wBytes)
			return off, nil
		}
	}
}

// writePage copies p behind its length into the open page, sealing pages
// as they fill; only a message larger than a page is split across pages.
// Nothing here crosses to the reactor except a kick when a page opens or
// is sealed.
func (c *Conn) writePage(ctx context.Context, p []byte) (int, error) {
	w := &c.pw
	need := prefixSize + len(p)
	if c.wOpen && w.room() < need && need <= c.payloadMax {
		c.seal(flushFull)
	}
	if !c.wOpen {
		if err := c.openPage(ctx, 0); err != nil {
			return 0, err
		}
	}
	w.putPrefix(len(p))
	off := w.put(p)
	for off < len(p) {
		c.seal(flushFull)
		if err := c.openPage(ctx, uint64(min(len(p)-off, c.payloadMax))); err != nil {
			// Part of the message is on its way: the stream cannot go on.
			c.werr = err
			return off, err
		}
		off += w.put(p[off:])
	}
	c.wMsgs++
	c.wBytes += uint64(len(p))
	if w.room() < prefixSize {
		c.seal(flushFull)
		c.kick()
	}
	return len(p), nil
}

// openPage starts a page in the next send buffer, waiting for one to be
// free; cont bytes at its start continue the previous page's message.
func (c *Conn) openPage(ctx context.Context, cont uint64) error {
	slots := uint64(c.txSlots)
	head := c.txHead.Load()
	if head-c.txDone.Load() >= slots {
		if err := c.waitWritable(ctx, head); err != nil {
			return err
		}
	}
	slot := int(head % slots)
	c.pw.start(c.txMem[slot*c.txBufSize:(slot+1)*c.txBufSize], cont)
	c.wOpen = true
	c.wPagesOpened.Add(1)
	c.kick() // the reactor arms the flush timer and watches for a pause
	return nil
}

// Causes of a page being sent, counted in Stats.
const (
	flushFull = iota
	flushTimer
	flushExplicit
	flushIdle
	flushCauses
)

// seal ends the open page and publishes it to the reactor. Under wmu: by
// the writer, or by the reactor when it holds wmu through TryLock.
func (c *Conn) seal(cause int) {
	head := c.txHead.Load()
	slot := int(head % uint64(c.txSlots))
	c.txLen[slot] = uint32(c.pw.seal())
	c.wOpen = false
	c.stats.flushes[cause].Add(1)
	c.stats.messagesSent.Store(c.wMsgs)
	c.stats.bytesSent.Store(c.wBytes)
	c.txHead.Store(head + 1)
}

// watchPage notices a page the writer opened since the last look: it arms
// the flush timer and, unless NoIdleFlush, the pause watch. On the
// reactor.
func (c *Conn) watchPage() {
	opened := c.wPagesOpened.Load()
	if opened == c.seenOpened {
		return
	}
	c.seenOpened = opened
	c.pageSince = time.Now()
	if !c.flushArmed {
		c.flushArmed = true
		c.flushTimer.StartOnce(c.cfg.FlushInterval)
	}
	if !c.cfg.NoIdleFlush {
		c.eng.watchIdle(c)
	}
}

// flushRetry is how soon the flush timer looks again when the writer is
// busy with the page (copying a large message, or waiting for a buffer).
const flushRetry = 10 * time.Millisecond

// onFlushTimer sends a page that has waited Config.FlushInterval. On the
// reactor.
func (c *Conn) onFlushTimer() {
	c.flushArmed = false
	if c.state != stateConnected || c.deadErr != nil {
		return
	}
	if !c.wmu.TryLock() {
		c.flushArmed = true
		c.flushTimer.StartOnce(min(flushRetry, c.cfg.FlushInterval))
		return
	}
	sealed := false
	if c.wOpen {
		if opened := c.wPagesOpened.Load(); opened != c.seenOpened {
			c.seenOpened, c.pageSince = opened, time.Now()
		}
		if age := time.Since(c.pageSince); age >= c.cfg.FlushInterval {
			c.seal(flushTimer)
			sealed = true
		} else {
			c.flushArmed = true
			c.flushTimer.StartOnce(c.cfg.FlushInterval - age)
		}
	}
	c.wmu.Unlock()
	if sealed {
		c.service()
	}
}

// checkIdle seals the open page when the writer has written nothing into
// it since the last look: the writer paused, and waiting longer would only
// delay what it wrote. It reports whether to stop watching (no page is
// open any more) and whether it sealed. On the reactor.
func (c *Conn) checkIdle() (done, sealed bool) {
	if c.state != stateConnected || c.deadErr != nil {
		return true, false
	}
	if !c.wmu.TryLock() {
		return false, false // in the middle of a write: not a pause
	}
	switch {
	case !c.wOpen:
		done = true
	case c.wMsgs != c.idleSeen:
		c.idleSeen = c.wMsgs
	default:
		c.seal(flushIdle)
		done, sealed = true, true
	}
	c.wmu.Unlock()
	return done, sealed
}

// waitWritable waits until fewer than all send buffers are in flight, for
// the write deadline, Close, the end of the connection and ctx (nil: none).
func (c *Conn) waitWritable(ctx context.Context, head uint64) error {
	slots := uint64(c.txSlots)
	start := time.Now()
	defer func() { c.stats.creditWait.Add(int64(time.Since(start))) }()
	if c.poll(func() bool { return head-c.txDone.Load() < slots }) {
		return nil
	}
	var stop func() bool
	if ctx != nil && ctx.Done() != nil {
		stop = context.AfterFunc(ctx, c.txWake.wake)
		defer stop()
	}
	for {
		c.txWaiting.Store(true)
		if head-c.txDone.Load() < slots {
			c.stopWaiting(&c.txWaiting)
			return nil
		}
		switch {
		case isClosed(c.closing):
			c.stopWaiting(&c.txWaiting)
			return c.opError("write", net.ErrClosed)
		case isClosed(c.dead):
			c.stopWaiting(&c.txWaiting)
			return c.writeDeadErr()
		case ctx != nil && ctx.Err() != nil:
			c.stopWaiting(&c.txWaiting)
			return c.opError("write", ctx.Err())
		case c.eng.r.OnReactor():
			// Waiting here would stop the reactor that frees the space.
			c.stopWaiting(&c.txWaiting)
			return c.opError("write", ErrWouldBlock)
		}
		err := c.txWake.wait()
		c.stopWaiting(&c.txWaiting)
		if errors.Is(err, os.ErrDeadlineExceeded) && head-c.txDone.Load() >= slots {
			return c.opError("write", os.ErrDeadlineExceeded)
		}
	}
}

func (c *Conn) writeDeadErr() error {
	err := c.deadErr
	if errors.Is(err, io.EOF) {
		err = syscall.EPIPE
	}
	return c.opError("write", err)
}
