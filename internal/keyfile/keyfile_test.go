package keyfile

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testFormat takes 8-byte keys, at most 2, in files of at most 64 bytes.
var testFormat = Format{
	Noun:      "key",
	MaxKeys:   2,
	MaxBytes:  64,
	BadBase64: func(err error) string { return "not base64" },
	Check: func(key []byte) string {
		if len(key) != 8 {
			return fmt.Sprintf("%d bytes, want 8", len(key))
		}
		return ""
	},
	NoKey: "no key",
}

func key(b byte) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 8)) }

func TestParseBadInput(t *testing.T) {
	for _, c := range []struct {
		name, in string
		line     int
		reason   string
	}{
		{"empty", "", 0, "no key"},
		{"comments only", "# a\n\n   \n", 0, "no key"},
		{"not base64", "# a\n!!!\n", 2, "not base64"},
		{"refused by Check", base64.StdEncoding.EncodeToString([]byte("short")), 1, "5 bytes, want 8"},
		{"duplicate", key(1) + "\n\n" + key(1), 3, "the same key as line 1"},
		{"too many", key(1) + "\n" + key(2) + "\n" + key(3), 3, "more than 2 keys"},
		{"line too long", strings.Repeat("A", 2000), 1, "token too long"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.in), testFormat)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrBad) {
				t.Fatalf("Parse(%q) = %v, want an *Error wrapping ErrBad", c.in, err)
			}
			if e.Line != c.line || !strings.Contains(e.Reason, c.reason) {
				t.Fatalf("Parse(%q): line %d %q, want line %d containing %q", c.in, e.Line, e.Reason, c.line, c.reason)
			}
		})
	}
}

func TestParseGood(t *testing.T) {
	got, err := Parse([]byte("# primary\n  "+key(1)+"  \n\n"+key(2)+"\n"), testFormat)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0][0] != 1 || got[1][0] != 2 {
		t.Fatalf("Parse = %v, want key 1 then key 2", got)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	var e *Error
	if _, err := Load(filepath.Join(dir, "missing"), testFormat); !errors.As(err, &e) || e.Line != 0 {
		t.Fatalf("Load(missing) = %v, want an *Error for the whole file", err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(key(1)+"\n"+strings.Repeat("#", 64)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big, testFormat); !errors.As(err, &e) || e.Reason != "larger than 64 bytes" {
		t.Fatalf("Load(big) = %v, want larger than 64 bytes", err)
	}
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte(key(1)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := Load(good, testFormat); err != nil || len(got) != 1 {
		t.Fatalf("Load(good) = %v, %v", got, err)
	}
}

// FuzzParse checks that Parse never panics, returns an *Error or between
// one and MaxKeys distinct keys that pass Check.
func FuzzParse(f *testing.F) {
	f.Add([]byte(key(1) + "\n" + key(2)))
	f.Add([]byte("# c\n\n" + key(1) + "\n" + key(1)))
	f.Add([]byte("!!"))
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, err := Parse(b, testFormat)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			return
		}
		if len(keys) == 0 || len(keys) > testFormat.MaxKeys {
			t.Fatalf("%d keys", len(keys))
		}
		seen := map[string]bool{}
		for _, k := range keys {
			if r := testFormat.Check(k); r != "" || seen[string(k)] {
				t.Fatalf("key %x: check %q, seen %v", k, r, seen[string(k)])
			}
			seen[string(k)] = true
		}
	})
}
