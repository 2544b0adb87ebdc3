package leakcheck

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// A descriptor opened after the count shows as a leak, by number and
// target; once closed it no longer does.
func TestDescriptorLeak(t *testing.T) {
	before := fds()
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	leaked := diff(before, fds())
	want := func(s string) bool { return strings.HasSuffix(s, " -> "+os.DevNull) }
	if !slices.ContainsFunc(leaked, want) {
		t.Fatalf("an open %s is not among the leaks: %v", os.DevNull, leaked)
	}
	f.Close()
	if leaked := diff(before, fds()); slices.ContainsFunc(leaked, want) {
		t.Fatalf("a closed %s is still a leak: %v", os.DevNull, leaked)
	}
}
