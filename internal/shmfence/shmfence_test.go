//go:build linux

package shmfence

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// A region mapped from /dev/shm is found by its address, and its range,
// once unmapped, is held unreadable until released.
func TestFindAndHold(t *testing.T) {
	name := "shmfence-test-" + strconv.Itoa(os.Getpid())
	path := filepath.Join("/dev/shm", name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	defer os.Remove(path)
	defer f.Close()
	const size = 1 << 20
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	r, ok, err := Find("fi_shm://" + name + "\x00")
	if err != nil || !ok {
		t.Fatalf("Find while mapped: %v %v", ok, err)
	}
	if _, err := r.Hold(); !errors.Is(err, unix.EEXIST) {
		t.Fatalf("Hold of a range still mapped: %v, want EEXIST", err)
	}
	if err := unix.Munmap(b); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := Find("fi_shm://" + name); ok {
		t.Fatal("Find after munmap still finds the region")
	}
	release, err := r.Hold()
	if err != nil {
		t.Fatalf("Hold of the unmapped range: %v", err)
	}
	release()
	release2, err := r.Hold()
	if err != nil {
		t.Fatalf("Hold after release: %v", err)
	}
	release2()
}
