package budget

import "golang.org/x/sys/unix"

// totalRAM is the physical memory in bytes, or 0 where sysinfo does not say.
func totalRAM() uint64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(max(si.Unit, 1))
}

// canLockAnyMemory reports whether the process holds CAP_IPC_LOCK, with
// which the kernel pins without bound.
func canLockAnyMemory() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[unix.CAP_IPC_LOCK/32].Effective&(1<<(unix.CAP_IPC_LOCK%32)) != 0
}
