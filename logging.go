package netio

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
)

// Connection-level events go to Config.Logger from a goroutine of their
// own: most are found on the reactor thread, which a slow handler (a full
// pipe on stderr) must never hold up. Records wait in a bounded queue; when
// it is full they are dropped and counted, as a slow subscriber's
// messages are.
type logRecord struct {
	lg    *slog.Logger
	level slog.Level
	msg   string
	attrs []slog.Attr
}

var (
	logQueue    = make(chan logRecord, 1024)
	logDraining atomic.Bool
	logsDropped atomic.Uint64
)

// logEvent logs msg with attrs at level through lg, if lg is not nil,
// without waiting for it. Any goroutine.
func logEvent(lg *slog.Logger, level slog.Level, msg string, attrs ...slog.Attr) {
	if lg == nil {
		return
	}
	select {
	case logQueue <- logRecord{lg, level, msg, attrs}:
	default:
		logsDropped.Add(1)
		return
	}
	if logDraining.CompareAndSwap(false, true) {
		go drainLogs()
	}
}

// drainLogs hands the queued records to their loggers, and exits when the
// queue is empty: a program that logs nothing keeps no goroutine for it.
func drainLogs() {
	for {
		select {
		case r := <-logQueue:
			r.lg.LogAttrs(context.Background(), r.level, r.msg, r.attrs...)
		default:
			logDraining.Store(false)
			// A record queued between the last receive and the Store
			// found the flag still set and started no drainer.
			if len(logQueue) == 0 || !logDraining.CompareAndSwap(false, true) {
				return
			}
		}
	}
}

// logEnded logs the end of a link that its owner did not close: the peer
// closed it, timed out, or it failed.
func logEnded(lg *slog.Logger, network string, local, remote Addr, err error) {
	msg, level := "netio: connection failed", slog.LevelWarn
	switch {
	case errors.Is(err, io.EOF):
		msg, level = "netio: peer closed the connection", slog.LevelInfo
	case errors.Is(err, ErrPeerTimeout):
		msg = "netio: peer timed out"
	}
	logEvent(lg, level, msg, slog.String("network", network),
		slog.String("local", local.String()), slog.String("remote", remote.String()), slog.Any("err", err))
}

// logSetupFailed logs a connection that failed before it was up.
func logSetupFailed(lg *slog.Logger, network string, remote Addr, err error) {
	logEvent(lg, slog.LevelWarn, "netio: connection set-up failed", slog.String("network", network),
		slog.String("remote", remote.String()), slog.Any("err", err))
}

// logRejected logs a connection request the listener at addr turned away.
func logRejected(lg *slog.Logger, network string, addr Addr, why string) {
	logEvent(lg, slog.LevelInfo, "netio: connection request rejected", slog.String("network", network),
		slog.String("listener", addr.String()), slog.String("reason", why))
}

// WithLogger sets Config.Logger.
func WithLogger(lg *slog.Logger) Option {
	return func(c *Config) error { c.Logger = lg; return nil }
}
