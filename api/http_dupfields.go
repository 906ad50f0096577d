package api

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/policy"
)

// duplicateField finds a JSON object member given twice in data, which
// already decoded: encoding/json keeps the last of two "key" members, and
// matches member names to fields case-insensitively, so {"key":"a","KEY":"b"}
// also names one field twice. It returns a 400 naming the repeated field,
// or nil. A streaming pass over the tokens (encoding/json's Decoder.Token)
// is the least code that sees case-folded duplicates too: the duplicate
// check of github.com/go-json-experiment/json's jsontext compares names
// exactly, and its case-sensitive v2 decoding would change every other
// error this API gives.
func duplicateField(data []byte) *httpError {
	dec := json.NewDecoder(bytes.NewReader(data))
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
// repeated member inside it, innermost first ({"key"} for the repeated
// member itself; callers append their own member name or "[i]"), or nil.
// ok is false when the tokens end early (never for data that decoded).
// Nothing is allocated for the path unless a member is repeated.
func dupValue(dec *json.Decoder) (path []string, ok bool) {
	tok, err := dec.Token()
	if err != nil {
		return nil, false
	}
	switch tok {
	case json.Delim('{'):
		// An item has 8 fields, and decoding already refused unknown ones.
		var seen [8]string
		n := 0
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, false
			}
			name, _ := tok.(string)
			for _, s := range seen[:n] {
				if strings.EqualFold(s, name) {
					return []string{name}, true
				}
			}
			if n < len(seen) {
				seen[n] = name
				n++
			}
			if path, ok := dupValue(dec); !ok || path != nil {
				return appendIf(ok, path, name), ok
			}
		}
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if path, ok := dupValue(dec); !ok || path != nil {
				return appendIf(ok, path, "["+strconv.Itoa(i)+"]"), ok
			}
		}
	default:
		return nil, true // a scalar
	}
	_, err = dec.Token() // the closing delimiter
	return nil, err == nil
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
