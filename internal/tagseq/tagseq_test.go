package tagseq

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A tag's sequence bookkeeping, driven step by step as the dispatcher
// drives it: messages (Take), acknowledgements, a farewell, a new link.
func TestTagSeq(t *testing.T) {
	type step struct {
		op   string // "take", "ack", "final", "expect", "relink", "relink-restarted"
		n    uint64
		want string // take: "ok gap first+n" or "skip"; final, relink: "gap first+n"
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"in order from the ack", []step{
			{"ack", 5, ""}, {"take", 5, "ok"}, {"take", 6, "ok"}, {"take", 7, "ok"},
		}},
		{"a gap between messages", []step{
			{"ack", 0, ""}, {"take", 0, "ok"}, {"take", 3, "ok gap 1+2"}, {"take", 4, "ok"},
		}},
		{"first message after the ack point (a drop policy lost it)", []step{
			{"ack", 10, ""}, {"take", 12, "ok gap 10+2"},
		}},
		{"messages of an earlier subscription before the ack are not ours", []step{
			{"take", 3, "skip"}, {"take", 4, "skip"}, {"ack", 9, ""}, {"take", 9, "ok"},
		}},
		{"after the ack, earlier numbers are still the old subscription's", []step{
			{"ack", 9, ""}, {"take", 7, "skip"}, {"take", 8, "skip"}, {"take", 9, "ok"}, {"take", 10, "ok"},
		}},
		{"farewell: the tail that did not come", []step{
			{"ack", 0, ""}, {"take", 0, "ok"}, {"take", 1, "ok"}, {"final", 5, "gap 2+3"}, {"final", 5, "gap 0+0"},
		}},
		{"farewell with everything received", []step{
			{"ack", 0, ""}, {"take", 0, "ok"}, {"final", 1, "gap 0+0"},
		}},
		{"farewell before any message: from the ack on", []step{
			{"ack", 4, ""}, {"final", 6, "gap 4+2"},
		}},
		{"relink to the same publisher: what was published meanwhile", []step{
			{"ack", 0, ""}, {"take", 0, "ok"}, {"take", 1, "ok"}, {"expect", 0, ""}, {"ack", 7, ""}, {"relink", 0, "gap 2+5"}, {"take", 7, "ok"},
		}},
		{"relink after a farewell counts only what followed it", []step{
			{"ack", 0, ""}, {"take", 0, "ok"}, {"final", 4, "gap 1+3"}, {"expect", 0, ""}, {"ack", 6, ""}, {"relink", 0, "gap 4+2"},
		}},
		{"relink with nothing missed", []step{
			{"ack", 0, ""}, {"take", 0, "ok"}, {"expect", 0, ""}, {"ack", 1, ""}, {"relink", 0, "gap 0+0"}, {"take", 1, "ok"},
		}},
		{"relink to a restarted publisher: its first messages, before the ack", []step{
			{"ack", 0, ""}, {"take", 0, "ok"}, {"take", 1, "ok"}, {"expect", 0, ""}, {"ack", 3, ""}, {"relink-restarted", 0, "gap 0+3"}, {"take", 3, "ok"}, {"take", 4, "ok"},
		}},
		{"relink to a restarted publisher that counts from 0 again", []step{
			{"ack", 0, ""}, {"take", 0, "ok"}, {"take", 50, "ok gap 1+49"}, {"expect", 0, ""}, {"ack", 0, ""}, {"relink-restarted", 0, "gap 0+0"}, {"take", 0, "ok"},
		}},
		{"relink whose ack did not come reports nothing", []step{
			{"ack", 0, ""}, {"take", 0, "ok"}, {"expect", 0, ""}, {"relink", 0, "gap 0+0"}, {"take", 1, "ok"},
		}},
		{"relink of a tag whose first ack never came", []step{
			{"expect", 0, ""}, {"ack", 20, ""}, {"relink", 0, "gap 0+0"}, {"take", 20, "ok"},
		}},
		{"an upgrade's ack does not move a known sequence", []step{
			{"ack", 0, ""}, {"take", 0, "ok"}, {"take", 1, "ok"}, {"ack", 5, ""}, {"take", 3, "ok gap 2+1"}, {"take", 5, "ok gap 4+1"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := New()
			var got, want []string
			for _, s := range tc.steps {
				var out string
				switch s.op {
				case "take":
					ok, first, n := ts.Take(s.n)
					switch {
					case !ok:
						out = "skip"
					case n > 0:
						out = fmt.Sprintf("ok gap %d+%d", first, n)
					default:
						out = "ok"
					}
				case "ack":
					ts.OnAck(s.n)
				case "final":
					first, n := ts.Final(s.n)
					out = fmt.Sprintf("gap %d+%d", first, n)
				case "expect":
					ts.ExpectAck()
				case "relink", "relink-restarted":
					first, n := ts.Relinked(s.op == "relink-restarted")
					out = fmt.Sprintf("gap %d+%d", first, n)
				}
				got = append(got, s.op+" "+fmt.Sprint(s.n)+": "+out)
				want = append(want, s.op+" "+fmt.Sprint(s.n)+": "+s.want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}
