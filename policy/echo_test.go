package policy

import (
	"strings"
	"testing"
)

func TestEcho(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `""`},
		{"login", `"login"`},
		{strings.Repeat("a", MaxEcho), `"` + strings.Repeat("a", MaxEcho) + `"`},
		{strings.Repeat("a", 3<<20), `"` + strings.Repeat("a", MaxEcho) + `"…(3145728 bytes)`},
		{"\x00\xff", `"\x00\xff"`},
	} {
		if got := Echo(tc.in); got != tc.want {
			t.Errorf("Echo(%d bytes) = %.100s, want %.100s", len(tc.in), got, tc.want)
		}
	}
}
