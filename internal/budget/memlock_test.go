package budget

import (
	"errors"
	"strings"
	"testing"
)

// A connection whose buffers do not fit the locked-memory limit fails at
// Listen or Dial with both numbers and what to change; one that fits, or
// fits exactly, passes.
func TestLockedMemoryError(t *testing.T) {
	if err := lockedMemoryError("verbs", 8<<20, 0, 1<<30, 8<<20); err != nil {
		t.Errorf("8 MiB under an 8 MiB limit: %v", err)
	}
	err := lockedMemoryError("verbs", 16<<20, 1<<20, 1<<30, 8<<20)
	if !errors.Is(err, ErrLimit) {
		t.Fatalf("16 MiB under an 8 MiB limit: %v, want ErrLimit", err)
	}
	for _, want := range []string{"verbs", "16777216 bytes", "1048576 registered", "8388608 bytes (RLIMIT_MEMLOCK)", "ulimit -l", "1073741824 bytes (SetMaxRegisteredMemory)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}
