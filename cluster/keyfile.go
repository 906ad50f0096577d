package cluster

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
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
	f, err := os.Open(path)
	if err != nil {
		return nil, &KeyFileError{Path: path, Reason: err.Error()}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxGossipKeyFileBytes+1))
	if err != nil {
		return nil, &KeyFileError{Path: path, Reason: err.Error()}
	}
	if len(b) > MaxGossipKeyFileBytes {
		return nil, &KeyFileError{Path: path, Reason: fmt.Sprintf("larger than %d bytes", MaxGossipKeyFileBytes)}
	}
	return parseGossipKeys(path, b)
}

// parseGossipKeys parses the contents of a gossip key file (see
// LoadGossipKeyFile); path only names it in errors.
func parseGossipKeys(path string, b []byte) ([][]byte, error) {
	var keys [][]byte
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), MaxGossipKeyFileBytes+1)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		bad := func(format string, args ...any) error {
			return &KeyFileError{Path: path, Line: line, Reason: fmt.Sprintf(format, args...)}
		}
		key, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, bad("not standard base64 (%v)", err)
		}
		if n := len(key); n != 16 && n != 24 && n != 32 {
			return nil, bad("key is %d bytes, want 16, 24 or 32 (AES-128, AES-192, AES-256)", n)
		}
		if first, dup := seen[string(key)]; dup {
			return nil, bad("the same key as line %d", first)
		}
		if len(keys) == MaxGossipKeys {
			return nil, bad("more than %d keys", MaxGossipKeys)
		}
		seen[string(key)] = line
		keys = append(keys, key)
	}
	if err := sc.Err(); err != nil {
		return nil, &KeyFileError{Path: path, Line: line + 1, Reason: err.Error()}
	}
	if len(keys) == 0 {
		return nil, &KeyFileError{Path: path, Reason: "no key (one base64 key per line, the first is the primary)"}
	}
	return keys, nil
}

// KeyFingerprint names a gossip key in logs and GossipKeyStatus without
// revealing it: the first 8 bytes of its SHA-256, in hex.
func KeyFingerprint(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:8])
}
