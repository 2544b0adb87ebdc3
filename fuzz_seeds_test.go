package netio

import (
	"testing"

	"github.com/netio-go/netio/internal/seedcorpus"
)

// The seed corpora of the fuzz targets live in testdata/fuzz/<Target>/
// (internal/seedcorpus); the tables here are written with fuzzSeed.

// fuzzSeed is one named input of a seed corpus.
type fuzzSeed struct {
	name string
	in   []byte
	end  error // how the seed ends, in the target's terms
	msgs int   // messages before that, where the target counts them
}

func corpus(seeds []fuzzSeed) []seedcorpus.Seed {
	out := make([]seedcorpus.Seed, len(seeds))
	for i, s := range seeds {
		out[i] = seedcorpus.Seed{Name: s.name, In: s.in, End: s.end, Msgs: s.msgs}
	}
	return out
}

// addSeeds gives the table's seeds to f as well, so that a fuzz run starts
// from them even without testdata.
func addSeeds(f *testing.F, seeds []fuzzSeed) { seedcorpus.Add(f, corpus(seeds)) }

// checkSeedCorpus checks that testdata/fuzz/<target> holds every seed of
// the table, as the table builds it, and runs each through check.
func checkSeedCorpus(t *testing.T, target string, seeds []fuzzSeed, check func(t *testing.T, s fuzzSeed)) {
	seedcorpus.Check(t, target, corpus(seeds), func(t *testing.T, s seedcorpus.Seed) {
		check(t, fuzzSeed{name: s.Name, in: s.In, end: s.End, msgs: s.Msgs})
	})
}
