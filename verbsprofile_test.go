package netio_test

import (
	"os"
	"testing"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/ofi"
)

// Under $NETIO_PROFILE=verbs (make test's profiled run) connections take
// verbs' path: a large Write is copied into registered memory, never sent
// from the writer's slice. This checks that the run is profiled at all.
func TestVerbsProfileInForce(t *testing.T) {
	if os.Getenv(ofi.ProfileEnv) != "verbs" {
		t.Skip("$NETIO_PROFILE is not verbs")
	}
	c, _ := pair(t)
	if netio.Lends(c, 1<<20) {
		t.Error("a connection sends from the writer's memory: the verbs profile is not in force")
	}
}
