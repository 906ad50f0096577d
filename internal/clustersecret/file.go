package clustersecret

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/sluice-rl/sluice/internal/keyfile"
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
	secrets, err := keyfile.Load(path, secretFormat)
	return secrets, fileError(path, err)
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
	secrets, err := keyfile.Parse(b, secretFormat)
	return secrets, fileError(path, err)
}

// secretFormat is the format of a cluster secret file (see Parse). Its
// messages never quote a secret.
var secretFormat = keyfile.Format{
	Noun:      "secret",
	MaxKeys:   MaxSecrets,
	MaxBytes:  MaxFileBytes,
	BadBase64: func(error) string { return "not standard base64 (as `openssl rand -base64 32` prints)" },
	Check: func(secret []byte) string {
		if n := len(secret); n < MinSecretBytes || n > MaxSecretBytes {
			return fmt.Sprintf("secret is %d bytes, want %d to %d random bytes", n, MinSecretBytes, MaxSecretBytes)
		}
		if weak(secret) {
			return "secret is one byte repeated, not random bytes"
		}
		return ""
	},
	NoKey: "no secret (one base64 secret per line, the first is the primary; `openssl rand -base64 32`)",
}

// fileError turns an error of package keyfile into a *FileError naming
// path; nil stays nil.
func fileError(path string, err error) error {
	var ke *keyfile.Error
	if errors.As(err, &ke) {
		return &FileError{Path: path, Line: ke.Line, Reason: ke.Reason}
	}
	return err
}

// weak reports a secret that is one byte repeated (all zeros, say): a
// placeholder, not a secret.
func weak(secret []byte) bool {
	return bytes.Count(secret, secret[:1]) == len(secret)
}
