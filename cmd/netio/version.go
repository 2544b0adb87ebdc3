package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/netio-go/netio/ofi"
)

const versionUsage = `usage: netio version [flags]

Prints the version of netio, of the Go toolchain that built it and of the
libfabric library loaded, with the libfabric API netio was compiled
against.

netio's releases are tags vX.Y.Z (semantic versioning) on the module
github.com/netio-go/netio. The version printed is the one Go recorded in
the binary (runtime/debug.ReadBuildInfo): the tag for 'go install
github.com/netio-go/netio/cmd/netio@vX.Y.Z', the version of netio a
program depends on for a program that imports it, and for a build from a
checkout what the go command made of it (a pseudo-version, or "(devel)").
`

// versionResult is what netio version prints; -json prints it as it is.
type versionResult struct {
	// Netio is the module version of github.com/netio-go/netio in this
	// binary: a tag such as v0.3.0 for 'go install ...@version', "(devel)"
	// for a build from a checkout.
	Netio string `json:"netio"`
	// Go is the Go version that built the binary, and the platform.
	Go       string `json:"go"`
	Platform string `json:"platform"`
	// Libfabric is the version of the libfabric library loaded; API is
	// the one netio was built against.
	Libfabric string `json:"libfabric_version"`
	API       string `json:"api_version"`
}

func versionMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", versionUsage, stderr)
	asJSON := fs.Bool("json", false, "print as JSON")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	res := versionResult{
		Netio:     "(unknown)",
		Go:        runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
		Libfabric: ofi.LibraryVersion().String(),
		API:       ofi.APIVersion.String(),
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		res.Netio = moduleVersion(bi)
		res.Go = bi.GoVersion
	}
	if *asJSON {
		if err := printJSON(stdout, res); err != nil {
			return failed(stderr, "version", err)
		}
		return exitOK
	}
	fmt.Fprintf(stdout, "netio %s\n%s %s\nlibfabric %s (netio built against API %s)\n", res.Netio, res.Go, res.Platform, res.Libfabric, res.API)
	return exitOK
}

// netioModule is the module this command belongs to.
const netioModule = "github.com/netio-go/netio"

// moduleVersion is netio's version in bi: that of the main module when
// this binary is netio's own command, or of the dependency when another
// module's binary links this package (tests do not).
func moduleVersion(bi *debug.BuildInfo) string {
	if bi.Main.Path == netioModule && bi.Main.Version != "" {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == netioModule {
			if d.Replace != nil {
				d = d.Replace
			}
			return d.Version
		}
	}
	return "(devel)"
}
