package netio_test

import (
	"testing"

	"github.com/netio-go/netio/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }
