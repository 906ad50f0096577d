package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/sluice-rl/sluice/internal/keyfile"
)

// Limits of a gossip key file (see LoadGossipKeyFile).
const (
	// MaxGossipKeys is the most keys a gossip key file may hold. A rotation
	// needs two; the rest is room for mistakes, not for a history.
	MaxGossipKeys = 16
	// MaxGossipKeyFileBytes is the largest gossip key file read.
	MaxGossipKeyFileBytes = 64 << 10
)

// ErrBadKeyFile is wrapped by every *KeyFileError: errors.Is(err,
// ErrBadKeyFile) holds for a gossip key file that cannot be used.
var ErrBadKeyFile = errors.New("cluster: bad gossip key file")

// KeyFileError reports why a gossip key file cannot be used. It reads
// "cluster: gossip key file PATH line N: reason" (without "line N" when the
// problem is the whole file) and wraps ErrBadKeyFile.
type KeyFileError struct {
	// Path is the file, as given.
	Path string
	// Line is the 1-based line of the bad key, or 0 for the whole file
	// (unreadable, too large, no key).
	Line int
	// Reason says what is wrong.
	Reason string
}

func (e *KeyFileError) Error() string { return "cluster: gossip key file " + e.detail() }

// detail is the message without the package prefix, for a ConfigError.
func (e *KeyFileError) detail() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s line %d: %s", e.Path, e.Line, e.Reason)
	}
	return e.Path + ": " + e.Reason
}

// Unwrap returns ErrBadKeyFile.
func (e *KeyFileError) Unwrap() error { return ErrBadKeyFile }

// LoadGossipKeyFile reads a gossip key file and returns its keys, the
// primary first.
//
// The format: one key per line, standard base64 (with padding, as
// `openssl rand -base64 32` prints it) of 16, 24 or 32 bytes, which select
// AES-128, AES-192 or AES-256. The first key is the primary key: it
// encrypts everything this node sends. Every key, the primary included,
// decrypts what this node receives. Blank lines and lines starting with
// '#' are ignored; spaces around a key are trimmed. A file holds at least
// one key and at most MaxGossipKeys, no key twice, and at most
// MaxGossipKeyFileBytes. Any other content is a *KeyFileError naming the
// file and the line.
func LoadGossipKeyFile(path string) ([][]byte, error) {
	keys, err := keyfile.Load(path, gossipKeyFormat)
	return keys, gossipKeyFileError(path, err)
}

// parseGossipKeys parses the contents of a gossip key file (see
// LoadGossipKeyFile); path only names it in errors.
func parseGossipKeys(path string, b []byte) ([][]byte, error) {
	keys, err := keyfile.Parse(b, gossipKeyFormat)
	return keys, gossipKeyFileError(path, err)
}

// gossipKeyFormat is the format of a gossip key file (see
// LoadGossipKeyFile).
var gossipKeyFormat = keyfile.Format{
	Noun:      "key",
	MaxKeys:   MaxGossipKeys,
	MaxBytes:  MaxGossipKeyFileBytes,
	BadBase64: func(err error) string { return fmt.Sprintf("not standard base64 (%v)", err) },
	Check: func(key []byte) string {
		if n := len(key); n != 16 && n != 24 && n != 32 {
			return fmt.Sprintf("key is %d bytes, want 16, 24 or 32 (AES-128, AES-192, AES-256)", n)
		}
		return ""
	},
	NoKey: "no key (one base64 key per line, the first is the primary)",
}

// gossipKeyFileError turns an error of package keyfile into a
// *KeyFileError naming path; nil stays nil.
func gossipKeyFileError(path string, err error) error {
	var ke *keyfile.Error
	if errors.As(err, &ke) {
		return &KeyFileError{Path: path, Line: ke.Line, Reason: ke.Reason}
	}
	return err
}

// KeyFingerprint names a gossip key in logs and GossipKeyStatus without
// revealing it: the first 8 bytes of its SHA-256, in hex.
func KeyFingerprint(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:8])
}
