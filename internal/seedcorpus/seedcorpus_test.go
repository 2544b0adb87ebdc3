package seedcorpus

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FileText is go test's corpus format: a header line and one []byte
// literal that quotes the input back exactly, whatever bytes it holds.
func TestFileText(t *testing.T) {
	for _, in := range [][]byte{nil, []byte("NTIO"), {0, 0xff, '"', '\\', '\n', 0x80}} {
		text := FileText(in)
		lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		if len(lines) != 2 || lines[0] != "go test fuzz v1" {
			t.Fatalf("FileText(%q) = %q: want a header and one value", in, text)
		}
		lit, ok := strings.CutPrefix(lines[1], "[]byte(")
		lit, ok2 := strings.CutSuffix(lit, ")")
		if !ok || !ok2 {
			t.Fatalf("FileText(%q): value %q is not a []byte literal", in, lines[1])
		}
		if got, err := strconv.Unquote(lit); err != nil || got != string(in) {
			t.Fatalf("FileText(%q) quotes %q (%v)", in, got, err)
		}
	}
}

// Check passes every seed whose file holds what the table builds to the
// target's check, once each.
func TestCheck(t *testing.T) {
	t.Chdir(t.TempDir())
	seeds := []Seed{{Name: "empty"}, {Name: "hello", In: []byte("hello")}}
	dir := filepath.Join("testdata", "fuzz", "FuzzX")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range seeds {
		if err := os.WriteFile(filepath.Join(dir, s.Name), []byte(FileText(s.In)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var checked []string
	Check(t, "FuzzX", seeds, func(t *testing.T, s Seed) { checked = append(checked, s.Name) })
	if strings.Join(checked, ",") != "empty,hello" {
		t.Fatalf("checked %v, want each seed once", checked)
	}
}
