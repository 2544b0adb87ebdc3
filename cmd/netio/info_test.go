package main

import (
	"bytes"
	"encoding/json"
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

// netio info says which providers netio has been tested on (tcp, sockets
// in part), which it is written for (verbs, untested here), and lists
// each provider's domains.
func TestInfoSupport(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"info"}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
	s := out.String()
	res := []string{
		`(?m)^  tcp: tested: `,
		`(?m)^  verbs( \(not on this machine\))?: untested: the provider netio is written for`,
	}
	if regexp.MustCompile(`(?m)^sockets `).MatchString(s) {
		res = append(res, `(?m)^sockets +tested `, `(?m)^  sockets: tested: in part: `)
	}
	if regexp.MustCompile(`(?m)^tcp .* lo +127\.0\.0\.1 `).MatchString(s) {
		res = append(res, `(?m)^domains \(-domain, netio\.WithDomain\):\n(  .*\n)*  tcp: (.*, )?lo(,|$)`)
	}
	for _, re := range res {
		if !regexp.MustCompile(re).MatchString(s) {
			t.Errorf("no %q in:\n%s", re, s)
		}
	}

	out.Reset()
	if code := run([]string{"info", "-json"}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
	var r struct {
		Support []map[string]any `json:"support"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	status := map[string]any{}
	for _, p := range r.Support {
		status[p["provider"].(string)] = p["status"]
	}
	if status["tcp"] != "tested" || status["verbs"] != "untested" {
		t.Errorf("support %v: want tcp tested, verbs untested", r.Support)
	}
	if st, ok := status["sockets"]; ok && st != "tested" {
		t.Errorf("sockets: %v, want tested", st)
	}

	// A run on a provider netio is known to fail on warns on stderr.
	supportOf["broken-for-the-test"] = providerSupport{Status: "broken", Note: "known to fail"}
	defer delete(supportOf, "broken-for-the-test")
	var warn bytes.Buffer
	warnProvider(&warn, "broken-for-the-test")
	if warn.String() != "netio: warning: provider broken-for-the-test is known to fail\n" {
		t.Errorf("warning %q", warn.String())
	}
	warn.Reset()
	warnProvider(&warn, "tcp")
	if warn.Len() != 0 {
		t.Errorf("warning for tcp: %q", warn.String())
	}
}
