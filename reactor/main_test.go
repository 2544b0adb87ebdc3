package reactor

import (
	"testing"

	"github.com/netio-go/netio/internal/leakcheck"
)

// TestMain fails the run if a test leaks a goroutine (a reactor loop not
// stopped, a Call waiter left hanging) or a file descriptor (an epoll,
// eventfd or timerfd not closed).
func TestMain(m *testing.M) { leakcheck.Main(m) }
