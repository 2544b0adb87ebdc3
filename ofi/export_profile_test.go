//go:build cgo && linux

package ofi

// UseProfile makes GetInfo apply the named profile ("verbs", or "" for
// none), whatever $NETIO_PROFILE says, until the returned function is
// called.
func UseProfile(name string) (restore func()) {
	currentProfile() // $NETIO_PROFILE is read once, before the override
	old := profileState.p
	profileState.p = nil
	if name == "verbs" {
		profileState.p = verbsProfile
	}
	return func() { profileState.p = old }
}

// SwapDescriptors gives a and b each other's memory descriptor: a post
// from either then names the other's region.
func SwapDescriptors(a, b *Region) { a.desc, b.desc = b.desc, a.desc }

// HoldShmLock takes the spin lock of this process's shm region a and
// keeps it, as a process killed while reading its queue leaves it.
func HoldShmLock(a Address) error { return holdShmLock(a) }
