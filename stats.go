package netio

import (
	"sync/atomic"
	"time"
)

// Stats are a connection's counters since it was established. The message
// and byte counts of the sending side are updated as buffers are sealed
// for the fabric (a page that is filled or packed), those of the
// receiving side as the reader finishes a buffer.
type Stats struct {
	MessagesSent     uint64 // whole messages written
	BytesSent        uint64 // their payload bytes
	MessagesReceived uint64 // whole messages read
	BytesReceived    uint64 // payload bytes read
	// PagesSent and PagesReceived count libfabric messages carrying data:
	// pages, filled in HighThroughput mode, packed in LowLatency mode
	// (where MessagesSent/PagesSent shows how many messages queued behind
	// sends in flight and went out together).
	PagesSent     uint64
	PagesReceived uint64
	// Pages sent, by what sent them (HighThroughput mode): a full page,
	// Config.FlushInterval, Flush or Close, and a pause of the writer.
	FlushesFull     uint64
	FlushesTimer    uint64
	FlushesExplicit uint64
	FlushesIdle     uint64
	// CreditWait is the time writes spent waiting for a free send buffer,
	// that is for the peer to return credit.
	CreditWait time.Duration
	// MessagesLent counts the large messages that went out from the
	// writer's own memory instead of being copied in (on providers that
	// need no registration of local memory, as tcp); LentCopiedBack the
	// send buffers of such messages copied in after all, because the peer
	// had no buffer free for them and Write does not wait for one.
	MessagesLent   uint64
	LentCopiedBack uint64
}

// connStats is where a Conn's sides publish their counters; each field has
// one writer.
type connStats struct {
	messagesSent     atomic.Uint64
	bytesSent        atomic.Uint64
	messagesReceived atomic.Uint64
	bytesReceived    atomic.Uint64
	buffersSent      atomic.Uint64
	buffersReceived  atomic.Uint64
	flushes          [flushCauses]atomic.Uint64
	creditWait       atomic.Int64
	messagesLent     atomic.Uint64
	lentCopied       atomic.Uint64
}

// Stats returns the connection's counters. It may be called at any time,
// from any goroutine, also after Close.
func (c *Conn) Stats() Stats {
	s := &c.stats
	return Stats{
		MessagesSent:     s.messagesSent.Load(),
		BytesSent:        s.bytesSent.Load(),
		MessagesReceived: s.messagesReceived.Load(),
		BytesReceived:    s.bytesReceived.Load(),
		PagesSent:        s.buffersSent.Load(),
		PagesReceived:    s.buffersReceived.Load(),
		FlushesFull:      s.flushes[flushFull].Load(),
		FlushesTimer:     s.flushes[flushTimer].Load(),
		FlushesExplicit:  s.flushes[flushExplicit].Load(),
		FlushesIdle:      s.flushes[flushIdle].Load(),
		CreditWait:       time.Duration(s.creditWait.Load()),
		MessagesLent:     s.messagesLent.Load(),
		LentCopiedBack:   s.lentCopied.Load(),
	}
}
