//go:build !linux

package budget

// totalRAM is 0: elsewhere the default limit is a fixed 4 GiB.
func totalRAM() uint64 { return 0 }

// canLockAnyMemory is false: nothing is pinned in this build.
func canLockAnyMemory() bool { return false }
