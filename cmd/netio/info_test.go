package main

import (
	"bytes"
	"regexp"
	"testing"
)

func TestInfo(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"info"}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
	s := out.String()
	for _, re := range []string{
		`^libfabric [0-9]+\.[0-9]+ \(netio built against API [0-9]+\.[0-9]+\)\n`,
		`(?m)^netio picks tcp \((netio\.DefaultNetwork|\$NETIO_PROVIDER)\), available$`,
		`(?m)^provider +netio +version +fabric +domain +address`,
		`(?m)^tcp +tested +[0-9.]+ +127\.0\.0\.1/32 +lo +127\.0\.0\.1 `,
	} {
		if !regexp.MustCompile(re).MatchString(s) {
			t.Errorf("no %q in:\n%s", re, s)
		}
	}
}

func TestInfoJSON(t *testing.T) {
	t.Setenv("NETIO_PROVIDER", "no-such-provider")
	var out, errOut bytes.Buffer
	if code := run([]string{"info", "-json", "-provider", "tcp"}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
	var r infoResult
	decode(t, out.String(), &r)
	if r.Libfabric == "" || r.API == "" || len(r.Endpoints) == 0 {
		t.Fatalf("%+v", r)
	}
	for _, e := range r.Endpoints {
		if e.Provider != "tcp" || e.Version == "" || e.Fabric == "" || e.Domain == "" || e.TxSize <= 0 || e.RxSize <= 0 {
			t.Errorf("endpoint %+v: want tcp only, described", e)
		}
	}
	if d := r.Default; d.Provider != "no-such-provider" || d.From != "$NETIO_PROVIDER" || d.Available {
		t.Errorf("default %+v: want $NETIO_PROVIDER's unavailable provider", d)
	}
}
