package netio

import (
	"bytes"
	"testing"
)

// A text key file is the same key with or without its line end.
func TestTrimTextNewline(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"0123456789abcdef0123456789abcdef\n", "0123456789abcdef0123456789abcdef"},
		{"0123456789abcdef0123456789abcdef\r\n", "0123456789abcdef0123456789abcdef"},
		{"0123456789abcdef", "0123456789abcdef"},
		// Binary keys are kept whole, a final newline byte included.
		{"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\n", "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\n"},
		{"\xff\xfe0123456789abcde\n", "\xff\xfe0123456789abcde\n"},
		// Only one line end goes.
		{"0123456789abcdef\n\n", "0123456789abcdef\n\n"},
	} {
		if got := trimTextNewline([]byte(tc.in)); !bytes.Equal(got, []byte(tc.want)) {
			t.Errorf("trimTextNewline(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
