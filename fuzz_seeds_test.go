package netio

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The seed corpora of the fuzz targets live in testdata/fuzz/<Target>/, in
// go test's own format, where plain go test runs them and go test -fuzz
// starts from them. Each target's seeds are built by a table in its test
// file; a Test of the target checks that the files are what the table
// builds (-update-fuzz-seeds rewrites them) and that each seed ends the
// way its name says. Files the table does not name, crashers the fuzzer
// saved among them, are left alone: plain go test runs them too.
// (FuzzPageDecoder and FuzzPageRoundTrip keep their own, older, machinery
// in page_fuzz_test.go.)

var updateFuzzSeeds = flag.Bool("update-fuzz-seeds", false, "rewrite the seed corpora in testdata/fuzz from the seed tables")

// fuzzSeed is one named input of a seed corpus.
type fuzzSeed struct {
	name string
	in   []byte
	end  error // how the seed ends, in the target's terms
	msgs int   // messages before that, where the target counts them
}

// seedFileText is a []byte input in go test's corpus format.
func seedFileText(in []byte) string {
	return "go test fuzz v1\n[]byte(" + strconv.Quote(string(in)) + ")\n"
}

// addSeeds gives the table's seeds to f as well, so that a fuzz run starts
// from them even without testdata.
func addSeeds(f *testing.F, seeds []fuzzSeed) {
	for _, s := range seeds {
		f.Add(s.in)
	}
}

// checkSeedCorpus checks that testdata/fuzz/<target> holds every seed of
// the table, as the table builds it, and runs each through check.
func checkSeedCorpus(t *testing.T, target string, seeds []fuzzSeed, check func(t *testing.T, s fuzzSeed)) {
	dir := filepath.Join("testdata", "fuzz", target)
	names := map[string]bool{}
	for _, s := range seeds {
		if names[s.name] {
			t.Fatalf("%s: two seeds named %s", target, s.name)
		}
		names[s.name] = true
		t.Run(s.name, func(t *testing.T) {
			file := filepath.Join(dir, s.name)
			want := seedFileText(s.in)
			if *updateFuzzSeeds {
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
