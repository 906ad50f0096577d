package clustersecret

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Limits of a cluster secret file (see Parse).
const (
	// MinSecretBytes is the fewest bytes a secret decodes to: 256 bits.
	MinSecretBytes = 32
	// MaxSecretBytes is the most bytes a secret decodes to.
	MaxSecretBytes = 64
	// MaxSecrets is the most secrets a file holds: a rotation needs two.
	MaxSecrets = 4
	// MaxFileBytes is the largest file read.
	MaxFileBytes = 16 << 10
)

// ErrBadFile is wrapped by every *FileError.
var ErrBadFile = errors.New("clustersecret: bad cluster secret file")

// FileError reports why a cluster secret file cannot be used. It reads
// "clustersecret: cluster secret file PATH line N: reason" (without
// "line N" for the whole file) and wraps ErrBadFile. It never quotes a
// secret.
type FileError struct {
	// Path is the file, as given.
	Path string
	// Line is the 1-based line at fault, 0 for the whole file.
	Line int
	// Reason says what is wrong.
	Reason string
}

func (e *FileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("clustersecret: cluster secret file %s line %d: %s", e.Path, e.Line, e.Reason)
	}
	return fmt.Sprintf("clustersecret: cluster secret file %s: %s", e.Path, e.Reason)
}

// Unwrap returns ErrBadFile.
func (e *FileError) Unwrap() error { return ErrBadFile }

// Load reads and parses a cluster secret file (see Parse).
func Load(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &FileError{Path: path, Reason: err.Error()}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, &FileError{Path: path, Reason: err.Error()}
	}
	if len(b) > MaxFileBytes {
		return nil, &FileError{Path: path, Reason: fmt.Sprintf("larger than %d bytes", MaxFileBytes)}
	}
	return Parse(path, b)
}

// Parse parses the contents of a cluster secret file; path only names it
// in errors. The format: one secret per line, standard base64 with
// padding of MinSecretBytes to MaxSecretBytes random bytes (`openssl rand
// -base64 32`); the first is the primary, every one is accepted (see the
// package documentation). Blank lines and lines starting with '#' are
// ignored, spaces around a secret trimmed. A file holds one to
// MaxSecrets secrets, none twice. Anything else is a *FileError naming
// the line.
func Parse(path string, b []byte) ([][]byte, error) {
	var secrets [][]byte
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1024), MaxFileBytes+1)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		bad := func(format string, args ...any) error {
			return &FileError{Path: path, Line: line, Reason: fmt.Sprintf(format, args...)}
		}
		secret, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, bad("not standard base64 (as `openssl rand -base64 32` prints)")
		}
		if n := len(secret); n < MinSecretBytes || n > MaxSecretBytes {
			return nil, bad("secret is %d bytes, want %d to %d random bytes", n, MinSecretBytes, MaxSecretBytes)
		}
		if weak(secret) {
			return nil, bad("secret is one byte repeated, not random bytes")
		}
		if first, dup := seen[string(secret)]; dup {
			return nil, bad("the same secret as line %d", first)
		}
		if len(secrets) == MaxSecrets {
			return nil, bad("more than %d secrets", MaxSecrets)
		}
		seen[string(secret)] = line
		secrets = append(secrets, secret)
	}
	if err := sc.Err(); err != nil {
		return nil, &FileError{Path: path, Line: line + 1, Reason: err.Error()}
	}
	if len(secrets) == 0 {
		return nil, &FileError{Path: path, Reason: "no secret (one base64 secret per line, the first is the primary; `openssl rand -base64 32`)"}
	}
	return secrets, nil
}

// weak reports a secret that is one byte repeated (all zeros, say): a
// placeholder, not a secret.
func weak(secret []byte) bool {
	return bytes.Count(secret, secret[:1]) == len(secret)
}
