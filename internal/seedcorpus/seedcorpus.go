// Package seedcorpus keeps the seed corpora of netio's fuzz targets: they
// live in testdata/fuzz/<Target>/ of each package, in go test's own format,
// where plain go test runs them and go test -fuzz starts from them. Each
// target's seeds are built by a table in its test file; a test of the
// target checks that the files are what the table builds
// (-update-fuzz-seeds rewrites them) and that each seed ends the way its
// name says. Files the table does not name, crashers the fuzzer saved
// among them, are left alone: plain go test runs them too.
package seedcorpus

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

var update = flag.Bool("update-fuzz-seeds", false, "rewrite the seed corpora in testdata/fuzz from the seed tables")

// Seed is one named input of a seed corpus.
type Seed struct {
	Name string
	In   []byte
	End  error // how the seed ends, in the target's terms
	Msgs int   // messages before that, where the target counts them
}

// FileText is a []byte input in go test's corpus format.
func FileText(in []byte) string {
	return "go test fuzz v1\n[]byte(" + strconv.Quote(string(in)) + ")\n"
}

// Add gives the table's seeds to f as well, so that a fuzz run starts from
// them even without testdata.
func Add(f *testing.F, seeds []Seed) {
	for _, s := range seeds {
		f.Add(s.In)
	}
}

// Check checks that testdata/fuzz/<target> holds every seed of the table,
// as the table builds it, and runs each through check.
func Check(t *testing.T, target string, seeds []Seed, check func(t *testing.T, s Seed)) {
	dir := filepath.Join("testdata", "fuzz", target)
	names := map[string]bool{}
	for _, s := range seeds {
		if names[s.Name] {
			t.Fatalf("%s: two seeds named %s", target, s.Name)
		}
		names[s.Name] = true
		t.Run(s.Name, func(t *testing.T) {
			file := filepath.Join(dir, s.Name)
			want := FileText(s.In)
			if *update {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := os.ReadFile(file); err != nil || string(got) != want {
				t.Fatalf("%s is not the seed the table builds (%v); rewrite the corpus with go test -run %s -update-fuzz-seeds", file, err, t.Name())
			}
			check(t, s)
		})
	}
}
