package netio_test

import (
	"encoding/json"
	"expvar"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/netio-go/netio"
)

// The counters of open connections are read through expvar, as a
// monitoring system reads /debug/vars.
func TestPublishExpvar(t *testing.T) {
	const name = "netio_test_metrics"
	if err := netio.PublishExpvar(name); err != nil {
		t.Fatal(err)
	}
	if err := netio.PublishExpvar(name); err == nil {
		t.Fatal("a second PublishExpvar of the same name succeeded")
	}
	client, server := pair(t)
	const n = 5
	for i := range n {
		writeAll(t, client, fmt.Sprintf("message %d", i))
	}
	for range n {
		nextMessage(t, server).Release()
	}

	srv := httptest.NewServer(expvar.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var vars map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&vars); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Conns []struct {
			Local, Remote string
			Stats         netio.Stats
		}
	}
	if err := json.Unmarshal(vars[name], &got); err != nil {
		t.Fatalf("%s: %v in %s", name, err, vars[name])
	}
	find := func(c *netio.Conn) *netio.Stats {
		for i, e := range got.Conns {
			if e.Local == c.LocalAddr().String() && e.Remote == c.RemoteAddr().String() {
				return &got.Conns[i].Stats
			}
		}
		t.Fatalf("connection %v not in %s", c, vars[name])
		return nil
	}
	if s := find(client); s.MessagesSent != n {
		t.Errorf("client's MessagesSent through expvar: %d, want %d", s.MessagesSent, n)
	}
	if s := find(server); s.MessagesReceived != n {
		t.Errorf("server's MessagesReceived through expvar: %d, want %d", s.MessagesReceived, n)
	}

	// A closed connection is no longer listed.
	client.Close()
	for _, e := range readConns(t, name) {
		if e == client.LocalAddr().String() {
			t.Errorf("closed connection %v still listed", client)
		}
	}
}

func readConns(t *testing.T, name string) []string {
	t.Helper()
	var got struct{ Conns []struct{ Local string } }
	if err := json.Unmarshal([]byte(expvar.Get(name).String()), &got); err != nil {
		t.Fatal(err)
	}
	var locals []string
	for _, c := range got.Conns {
		locals = append(locals, c.Local)
	}
	return locals
}
