package budget

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// On providers that pin registered memory (verbs, and any that asks for
// local registration), the kernel bounds what a process pins by
// RLIMIT_MEMLOCK unless it holds CAP_IPC_LOCK, and fi_mr_reg fails past
// it, deep inside a connection's set-up. Listen and Dial check one
// connection's buffers against the limit up front instead, with an error
// that says what to change.

// CheckLockedMemory checks that a connection that registers need bytes on
// provider can pin them, next to what b holds registered already: nil when
// the provider does not pin (pins false), the process may pin without
// bound, or the limit has room.
func (b *Budget) CheckLockedMemory(provider string, pins bool, need int64) error {
	if !pins || canLockAnyMemory() {
		return nil
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim); err != nil || lim.Cur == unix.RLIM_INFINITY {
		return nil
	}
	return lockedMemoryError(provider, need, b.Used(), b.Limit(), lim.Cur)
}

// lockedMemoryError is the error of a connection that registers need
// bytes, in a process that has registered some already, under a
// locked-memory limit of limit bytes; nil if it fits. budget is the
// process's own limit (SetMaxRegisteredMemory), named for the user to
// lower where the other cannot be raised.
func lockedMemoryError(provider string, need, registered, budget int64, limit uint64) error {
	if uint64(need+registered) <= limit {
		return nil
	}
	return fmt.Errorf("%w: provider %s pins registered memory, and a connection's buffers (%d bytes, with %d registered already) "+
		"do not fit the locked-memory limit of %d bytes (RLIMIT_MEMLOCK): raise it (ulimit -l unlimited, or memlock in "+
		"/etc/security/limits.conf), or make the buffers smaller (Config.BufferSize, Config.Window); "+
		"the process's registered-memory budget is %d bytes (SetMaxRegisteredMemory), keep it within the limit",
		ErrLimit, provider, need, registered, limit, budget)
}
