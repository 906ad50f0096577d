// Package keyfile reads the files of base64 keys that a node's flags name
// (cluster's --gossip-key-file, internal/clustersecret's
// --cluster-secret-file): one key per line, standard base64 with padding,
// the first the primary; blank lines and lines starting with '#' ignored,
// spaces around a key trimmed; no key twice; a bounded count and size.
// What a key must decode to, and the words of the messages, are the
// caller's (Format); the caller turns an *Error into its own error, which
// names its file and flag. It imports nothing of ours.
package keyfile

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

// ErrBad is wrapped by every *Error.
var ErrBad = errors.New("keyfile: bad key file")

// Error reports why a key file cannot be used: Line, 1-based, is the line
// at fault, or 0 for the whole file (unreadable, too large, no key). It
// never quotes a key.
type Error struct {
	Line   int
	Reason string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("keyfile: line %d: %s", e.Line, e.Reason)
	}
	return "keyfile: " + e.Reason
}

// Unwrap returns ErrBad.
func (e *Error) Unwrap() error { return ErrBad }

// Format is what one kind of key file allows, and how its messages name
// things.
type Format struct {
	// Noun names one key in messages: "key", "secret".
	Noun string
	// MaxKeys is the most keys a file holds.
	MaxKeys int
	// MaxBytes is the largest file read.
	MaxBytes int
	// BadBase64 is the reason for a line that is not standard base64,
	// given the decoder's error.
	BadBase64 func(err error) string
	// Check returns the reason a decoded key is refused, or "".
	Check func(key []byte) string
	// NoKey is the reason for a file without a key.
	NoKey string
}

// Load reads the file at path, at most f.MaxBytes of it, and parses it
// (see Parse). Every error is an *Error.
func Load(path string, f Format) ([][]byte, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, &Error{Reason: err.Error()}
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, int64(f.MaxBytes)+1))
	if err != nil {
		return nil, &Error{Reason: err.Error()}
	}
	if len(b) > f.MaxBytes {
		return nil, &Error{Reason: fmt.Sprintf("larger than %d bytes", f.MaxBytes)}
	}
	return Parse(b, f)
}

// Parse returns the keys of a key file's contents b, the primary first.
// Every error is an *Error.
func Parse(b []byte, f Format) ([][]byte, error) {
	var keys [][]byte
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1024), f.MaxBytes+1)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		bad := func(reason string) error { return &Error{Line: line, Reason: reason} }
		key, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, bad(f.BadBase64(err))
		}
		if reason := f.Check(key); reason != "" {
			return nil, bad(reason)
		}
		if first, dup := seen[string(key)]; dup {
			return nil, bad(fmt.Sprintf("the same %s as line %d", f.Noun, first))
		}
		if len(keys) == f.MaxKeys {
			return nil, bad(fmt.Sprintf("more than %d %ss", f.MaxKeys, f.Noun))
		}
		seen[string(key)] = line
		keys = append(keys, key)
	}
	if err := sc.Err(); err != nil {
		return nil, &Error{Line: line + 1, Reason: err.Error()}
	}
	if len(keys) == 0 {
		return nil, &Error{Reason: f.NoKey}
	}
	return keys, nil
}
