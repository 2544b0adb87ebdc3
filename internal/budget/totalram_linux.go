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
