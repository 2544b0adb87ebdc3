package netio_test

import (
	"encoding/json"
	"errors"
	"flag"
	"io"
	"testing"

	"github.com/netio-go/netio"
)

func TestParseMode(t *testing.T) {
	for in, want := range map[string]netio.Mode{
		"low-latency": netio.LowLatency, "ll": netio.LowLatency, "LL": netio.LowLatency,
		"Low-Latency": netio.LowLatency, "LowLatency": netio.LowLatency,
		"high-throughput": netio.HighThroughput, "ht": netio.HighThroughput, "HT": netio.HighThroughput,
		"HIGH-THROUGHPUT": netio.HighThroughput, "HighThroughput": netio.HighThroughput,
	} {
		if got, err := netio.ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "fast", "l", "low latency", " ll", "mode(1)", "1"} {
		if _, err := netio.ParseMode(in); !errors.Is(err, netio.ErrInvalidConfig) {
			t.Errorf("ParseMode(%q): %v, want an error wrapping ErrInvalidConfig", in, err)
		}
	}
	// Every mode's name parses back to it.
	for _, m := range []netio.Mode{netio.LowLatency, netio.HighThroughput} {
		if got, err := netio.ParseMode(m.String()); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
}

func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]netio.Policy{
		"block": netio.Block, "BLOCK": netio.Block,
		"drop-oldest": netio.DropOldest, "Drop-Oldest": netio.DropOldest, "DropOldest": netio.DropOldest,
		"drop-newest": netio.DropNewest, "DROP-NEWEST": netio.DropNewest, "dropnewest": netio.DropNewest,
	} {
		if got, err := netio.ParsePolicy(in); err != nil || got != want {
			t.Errorf("ParsePolicy(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "drop", "oldest", "drop_oldest", "0"} {
		if _, err := netio.ParsePolicy(in); !errors.Is(err, netio.ErrInvalidConfig) {
			t.Errorf("ParsePolicy(%q): %v, want an error wrapping ErrInvalidConfig", in, err)
		}
	}
	for _, p := range []netio.Policy{netio.Block, netio.DropOldest, netio.DropNewest} {
		if got, err := netio.ParsePolicy(p.String()); err != nil || got != p {
			t.Errorf("ParsePolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
}

// A Config with a mode and a policy goes through JSON by name, and a bad
// name is refused with ErrInvalidConfig.
func TestModePolicyJSON(t *testing.T) {
	type file struct {
		Mode   netio.Mode
		Policy netio.Policy
	}
	b, err := json.Marshal(file{netio.HighThroughput, netio.DropOldest})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"Mode":"high-throughput","Policy":"drop-oldest"}`; string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
	var f file
	if err := json.Unmarshal([]byte(`{"Mode":"HT","Policy":"drop-newest"}`), &f); err != nil {
		t.Fatal(err)
	}
	if f != (file{netio.HighThroughput, netio.DropNewest}) {
		t.Errorf("decoded %+v", f)
	}
	f = file{netio.HighThroughput, netio.DropNewest}
	if err := json.Unmarshal([]byte(`{"Mode":"fastest"}`), &f); !errors.Is(err, netio.ErrInvalidConfig) {
		t.Errorf("decoding a bad mode: %v, want ErrInvalidConfig", err)
	}
	if f.Mode != netio.HighThroughput {
		t.Errorf("a failed decode changed the mode to %v", f.Mode)
	}
	if err := json.Unmarshal([]byte(`{"Policy":"lossy"}`), &f); !errors.Is(err, netio.ErrInvalidConfig) {
		t.Errorf("decoding a bad policy: %v, want ErrInvalidConfig", err)
	}
	// Values that name nothing do not marshal.
	if _, err := netio.Mode(7).MarshalText(); !errors.Is(err, netio.ErrInvalidConfig) {
		t.Errorf("Mode(7).MarshalText: %v, want ErrInvalidConfig", err)
	}
	if _, err := netio.Policy(9).MarshalText(); !errors.Is(err, netio.ErrInvalidConfig) {
		t.Errorf("Policy(9).MarshalText: %v, want ErrInvalidConfig", err)
	}
}

// flag.TextVar takes a mode by name.
func TestModeFlag(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var m netio.Mode
	fs.TextVar(&m, "mode", netio.LowLatency, "mode")
	if err := fs.Parse([]string{"-mode", "ht"}); err != nil || m != netio.HighThroughput {
		t.Fatalf("-mode ht: %v, %v", m, err)
	}
	if err := fs.Parse([]string{"-mode", "fast"}); err == nil {
		t.Fatal("-mode fast was accepted")
	}
}
