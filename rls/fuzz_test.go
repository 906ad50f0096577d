package rls

import (
	"errors"
	"testing"
)

// FuzzParse: any bytes either load or fail with an *Error naming the
// file; never a panic. A file that loads answers lookups of any entries.
func FuzzParse(f *testing.F) {
	f.Add([]byte(matchConfig))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"))
	f.Add([]byte("domain: d\ndescriptors: &x\n  - key: a\n    descriptors: *x\n"))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: k\n    value: v*\n    share_threshold: true\n    rate_limit:\n      <<: {unit: day}\n"))
	f.Add([]byte("'''"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse([]File{{Name: "fuzz.yaml", Data: data}}, Options{})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.File != "fuzz.yaml" || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v is not an *Error naming the file", err)
			}
			return
		}
		for _, d := range c.Domains() {
			for _, entries := range [][]KV{nil, {{"k", "v"}}, {{"k", ""}, {"a", "b"}}, {{"key", "value*"}}} {
				m, ok := Lookup(c, d, entries)
				if !ok {
					t.Fatalf("domain %q listed but unknown", d)
				}
				if m.Rule != nil && m.StatsKey == "" {
					t.Fatalf("a rule without a metric key: %+v", m)
				}
				_ = CounterKey(d, entries, m.Shared)
			}
		}
	})
}
