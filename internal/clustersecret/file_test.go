package clustersecret

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// secret returns a base64 secret of n bytes seeded by b.
func secret(b byte, n int) string {
	s := make([]byte, n)
	for i := range s {
		s[i] = b + byte(i)
	}
	return base64.StdEncoding.EncodeToString(s)
}

func TestParseBadInput(t *testing.T) {
	a, b := secret(1, 32), secret(2, 48)
	five := strings.Repeat(secret(9, 32)+"\n", 1)
	for i := range 4 {
		five += secret(byte(10+i), 32) + "\n"
	}
	cases := []struct {
		name, in string
		line     int
		reason   string
	}{
		{"empty", "", 0, "no secret"},
		{"comments only", "# a\n\n   \n", 0, "no secret"},
		{"not base64", "not base64!\n", 1, "not standard base64"},
		{"raw text", "correct horse battery staple correct horse\n", 1, "not standard base64"},
		{"too short", secret(1, 31), 1, "31 bytes, want 32 to 64"},
		{"too long", secret(1, 65), 1, "65 bytes, want 32 to 64"},
		{"zeros", base64.StdEncoding.EncodeToString(make([]byte, 32)), 1, "one byte repeated"},
		{"duplicate", a + "\n#x\n" + a + "\n", 3, "the same secret as line 1"},
		{"too many", five, 5, "more than 4 secrets"},
		{"unpadded", strings.TrimRight(secret(1, 32), "="), 1, "not standard base64"},
		{"second bad", a + "\n" + b + "x\n", 2, "not standard base64"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("f", []byte(c.in))
			var fe *FileError
			if !errors.As(err, &fe) || !errors.Is(err, ErrBadFile) {
				t.Fatalf("Parse(%q) = %v, want a *FileError wrapping ErrBadFile", c.in, err)
			}
			if fe.Line != c.line || !strings.Contains(fe.Reason, c.reason) {
				t.Fatalf("Parse: line %d %q, want line %d containing %q", fe.Line, fe.Reason, c.line, c.reason)
			}
			if strings.Contains(err.Error(), strings.TrimSpace(c.in)) && c.in != "" && !strings.HasPrefix(c.in, "#") {
				t.Fatalf("the error %q quotes the file's content", err)
			}
		})
	}
}

func TestParseGood(t *testing.T) {
	a, b := secret(1, 32), secret(2, 64)
	got, err := Parse("f", []byte("# primary\n  "+a+"  \n\n"+b+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || base64.StdEncoding.EncodeToString(got[0]) != a || base64.StdEncoding.EncodeToString(got[1]) != b {
		t.Fatalf("Parse = %d secrets, want a then b", len(got))
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "missing")); !errors.Is(err, ErrBadFile) {
		t.Fatalf("missing file: %v, want ErrBadFile", err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, MaxFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("big file: %v, want larger than", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(secret(1, 32) + "\n"))
	f.Add([]byte("# c\n" + secret(1, 32) + "\n" + secret(2, 40)))
	f.Add([]byte(""))
	f.Add([]byte("====\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		secrets, err := Parse("f", b)
		if err != nil {
			if !errors.Is(err, ErrBadFile) {
				t.Fatalf("error %v does not wrap ErrBadFile", err)
			}
			return
		}
		if len(secrets) == 0 || len(secrets) > MaxSecrets {
			t.Fatalf("%d secrets", len(secrets))
		}
		for _, s := range secrets {
			if len(s) < MinSecretBytes || len(s) > MaxSecretBytes {
				t.Fatalf("a secret of %d bytes", len(s))
			}
		}
		if _, err := Derive(secrets); err != nil {
			t.Fatalf("Derive of parsed secrets: %v", err)
		}
	})
}
