package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"regexp"
	"runtime"
	"runtime/debug"
	"testing"
)

// netio version prints netio's module version ("(devel)" from a
// checkout), Go's and libfabric's.
func TestVersion(t *testing.T) {
	bin := buildNetio(t)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "version")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("netio version: %v\nstderr:\n%s", err, stderr.String())
	}
	want := `^netio \(devel\)\n` + regexp.QuoteMeta(runtime.Version()) + ` [a-z0-9]+/[a-z0-9]+\nlibfabric [0-9]+\.[0-9]+ \(netio built against API [0-9]+\.[0-9]+\)\n$`
	if !regexp.MustCompile(want).MatchString(stdout.String()) {
		t.Errorf("stdout:\n%s\nwant %s", stdout.String(), want)
	}

	stdout.Reset()
	cmd = exec.Command(bin, "version", "-json")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("netio version -json: %v\nstderr:\n%s", err, stderr.String())
	}
	var v map[string]string
	if err := json.Unmarshal(stdout.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if v["netio"] != "(devel)" || v["go"] != runtime.Version() || v["libfabric_version"] == "" || v["api_version"] == "" {
		t.Errorf("%v", v)
	}
}

// What 'go install github.com/netio-go/netio/cmd/netio@v1.2.3' records is
// the version printed.
func TestModuleVersion(t *testing.T) {
	for _, tt := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Path: "github.com/netio-go/netio", Version: "v1.2.3"}}, "v1.2.3"},
		{debug.BuildInfo{Main: debug.Module{Path: "github.com/netio-go/netio", Version: "(devel)"}}, "(devel)"},
		{debug.BuildInfo{Main: debug.Module{Path: "example.com/app"}, Deps: []*debug.Module{{Path: "github.com/netio-go/netio", Version: "v0.4.0"}}}, "v0.4.0"},
		{debug.BuildInfo{Main: debug.Module{Path: "example.com/app"}, Deps: []*debug.Module{{Path: "github.com/netio-go/netio", Version: "v0.4.0", Replace: &debug.Module{Path: "../netio", Version: ""}}}}, ""},
		{debug.BuildInfo{Main: debug.Module{Path: "example.com/app"}}, "(devel)"},
	} {
		if got := moduleVersion(&tt.bi); got != tt.want {
			t.Errorf("moduleVersion(%+v) = %q, want %q", tt.bi.Main, got, tt.want)
		}
	}
}
