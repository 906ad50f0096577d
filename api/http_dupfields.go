package api

import (
	"bytes"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sluice-rl/sluice/policy"
)

// checkFieldNames are the member names of a check body: the top level's
// and an item's (checkRequestJSON, checkItemJSON).
var checkFieldNames = [...]string{"checks", "key", "policy", "limit", "period", "burst", "cost", "algorithm", "failure_mode", "calendar", "timezone"}

// duplicateField finds a JSON object member given twice in data, a check
// body that already decoded: encoding/json keeps the last of two "key"
// members, and matches member names to fields case-insensitively, so
// {"key":"a","KEY":"b"} also names one field twice. It returns a 400
// naming the repeated member, or nil.
//
// The pass reads the raw tokens with jsontext (github.com/go-json-experiment/json,
// whose decoding v1 already depends on), unquotes each name into a stack
// buffer and folds it onto the known fields, so it allocates nothing per
// member. jsontext's own duplicate check compares names exactly, which
// misses "KEY"; decoding with its case-sensitive v2 would change every
// other error this API gives.
func duplicateField(data []byte) *httpError {
	dec := jsontext.NewDecoder(bytes.NewBuffer(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	path, _ := dupValue(dec)
	if path == nil {
		return nil
	}
	slices.Reverse(path)
	var b strings.Builder
	for _, p := range path {
		if b.Len() > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return badRequest(shortField(b.String()), "given more than once (JSON member names match fields case-insensitively)")
}

// dupValue reads one value from dec and returns the path to the first
// repeated member inside it, innermost first ({"KEY"} for the repeated
// member itself; callers append their own member name or "[i]"), or nil.
// ok is false when the tokens end early (never for data that decoded).
func dupValue(dec *jsontext.Decoder) (path []string, ok bool) {
	switch dec.PeekKind() {
	case '{':
		if _, err := dec.ReadToken(); err != nil {
			return nil, false
		}
		var seen uint32 // bit i: checkFieldNames[i] was given
		var buf [32]byte
		for dec.PeekKind() != '}' {
			raw, err := dec.ReadValue()
			if err != nil {
				return nil, false
			}
			name, err := jsontext.AppendUnquote(buf[:0], raw)
			if err != nil {
				return nil, false
			}
			if i := foldField(name); i >= 0 {
				if seen&(1<<i) != 0 {
					return []string{string(name)}, true
				}
				seen |= 1 << i
			}
			if path, ok := dupValue(dec); !ok || path != nil {
				return appendIf(ok, path, string(name)), ok
			}
		}
	case '[':
		if _, err := dec.ReadToken(); err != nil {
			return nil, false
		}
		for i := 0; dec.PeekKind() != ']'; i++ {
			if path, ok := dupValue(dec); !ok || path != nil {
				return appendIf(ok, path, "["+strconv.Itoa(i)+"]"), ok
			}
		}
	default:
		return nil, dec.SkipValue() == nil // a scalar
	}
	_, err := dec.ReadToken() // the closing delimiter
	return nil, err == nil
}

// foldField is the index in checkFieldNames of the field name matches as
// encoding/json matches names (case-insensitively), or -1.
func foldField(name []byte) int {
	for i, f := range checkFieldNames {
		if bytes.EqualFold(name, []byte(f)) {
			return i
		}
	}
	return -1
}

// appendIf appends seg to path when ok.
func appendIf(ok bool, path []string, seg string) []string {
	if !ok {
		return nil
	}
	return append(path, seg)
}

// shortField cuts a field name or path quoted from the input to
// policy.MaxEcho bytes, followed by its length when longer.
func shortField(s string) string {
	if len(s) > policy.MaxEcho {
		return s[:policy.MaxEcho] + "…(" + strconv.Itoa(len(s)) + " bytes)"
	}
	return s
}
