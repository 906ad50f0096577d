package rls

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func parseOne(t *testing.T, name, yaml string) (*Config, error) {
	t.Helper()
	return Parse([]File{{Name: name, Data: []byte(yaml)}}, Options{})
}

// TestParseErrors: every invalid file the reference rejects is rejected,
// with an *Error naming the file, the line and the field, worded as the
// reference words it.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		line       int
		field      string
		msg        string
	}{
		{"empty file", "", 0, "domain", "config file cannot have empty domain"},
		{"no domain", "descriptors:\n  - key: a\n", 0, "domain", "config file cannot have empty domain"},
		{"null domain", "domain: ~\n", 1, "domain", "config file cannot have empty domain"},
		{"malformed", "'''\n", 2, "", "malformed YAML"},
		{"not a mapping", "- a\n- b\n", 1, "", "not a mapping"},
		{"unknown key", "domain: d\ndescriptors:\n  - key: a\n    ratelimit:\n      unit: day\n", 4,
			"descriptors[0].ratelimit", "config error, unknown key 'ratelimit'"},
		{"unknown nested key", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: day\n      requestsperunit: 5\n", 6,
			"descriptors[0].rate_limit.requestsperunit", "unknown key 'requestsperunit'"},
		{"unknown top key", "domain: d\ndescriptor:\n  - key: a\n", 2, "descriptor", "unknown key 'descriptor'"},
		{"non-string key", "0.25: d\ndomain: d\n", 1, "", "key is not of type string: 0.25"},
		{"list of scalars", "domain: d\ndescriptors:\n  - a\n  - b\n", 3, "descriptors[0]", "list of type other than map: a"},
		{"empty key", "domain: d\ndescriptors:\n  - value: v\n", 3, "descriptors[0].key", "descriptor has empty key"},
		{"duplicate key", "domain: d\ndescriptors:\n  - key: a\n    value: v\n  - key: a\n    value: v\n", 5,
			"descriptors[1]", "duplicate descriptor composite key 'd.a_v'"},
		{"duplicate nested key", "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n      - key: b\n", 6,
			"descriptors[0].descriptors[1]", "duplicate descriptor composite key 'd.a.b'"},
		{"bad unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 5\n", 5,
			"descriptors[0].rate_limit.unit", "invalid rate limit unit 'fortnight'"},
		{"missing unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      requests_per_unit: 5\n", 4,
			"descriptors[0].rate_limit.unit", "invalid rate limit unit ''"},
		{"unknown unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: unknown\n", 5,
			"descriptors[0].rate_limit.unit", "invalid rate limit unit 'unknown'"},
		{"unlimited with unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      unit: day\n", 6,
			"descriptors[0].rate_limit.unit", "should not specify rate limit unit when unlimited"},
		{"replaces self", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      name: me\n      unit: second\n      replaces:\n        - name: me\n", 8,
			"descriptors[0].rate_limit.replaces[0].name", "replaces should not contain name of same descriptor"},
		{"replaces empty", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      replaces:\n        - name:\n", 7,
			"descriptors[0].rate_limit.replaces[0].name", "should not have an empty replaces entry"},
		{"share_threshold without wildcard", "domain: d\ndescriptors:\n  - key: a\n    value: b\n    share_threshold: true\n", 3,
			"descriptors[0].share_threshold", "share_threshold can only be used with wildcard values"},
		{"float anywhere", "domain: d\ndescriptors:\n  - key: a\n    value: 1.5\n", 4, "descriptors[0].value", "error checking config"},
		{"negative requests", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: -1\n", 6,
			"descriptors[0].rate_limit.requests_per_unit", "into uint32"},
		{"requests above uint32", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 4294967296\n", 6,
			"descriptors[0].rate_limit.requests_per_unit", "into uint32"},
		{"quoted requests", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: \"5\"\n", 6,
			"descriptors[0].rate_limit.requests_per_unit", "into uint32"},
		{"quoted bool", "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: \"true\"\n", 4, "descriptors[0].shadow_mode", "into a bool"},
		{"int bool", "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: 1\n", 4, "descriptors[0].shadow_mode", "into a bool"},
		{"descriptors not a list", "domain: d\ndescriptors: a\n", 2, "descriptors", "into a list of descriptors"},
		{"rate_limit not a mapping", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: 5\n", 4, "descriptors[0].rate_limit", "rate_limit mapping"},
		{"domain a mapping", "domain: {a: b}\n", 1, "domain", "into a string"},
		{"misplaced key with a float", "domain: d\ndescriptors:\n  - key: a\n    unit: 2.5\n", 4, "descriptors[0].unit", "error checking config"},
		{"alias cycle", "domain: d\ndescriptors: &x\n  - key: a\n    descriptors: *x\n", 0, "", "too many nodes through its aliases"},
		{"billion laughs", "domain: d\ndescriptors:\n  - &a {key: a, descriptors: [*a, *a]}\n", 0, "", "too many nodes"},
		{"deep nesting", "domain: d\n" + deep(maxDepth+1), 0, "", "levels deep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseOne(t, "f.yaml", tt.yaml)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err = %v, want an *Error wrapping ErrInvalidConfig", err)
			}
			if e.File != "f.yaml" || (tt.line != 0 && e.Line != tt.line) || e.Field != tt.field || !strings.Contains(e.Msg, tt.msg) {
				t.Errorf("got %s:%d field %q msg %q\nwant f.yaml:%d field %q msg containing %q", e.File, e.Line, e.Field, e.Msg, tt.line, tt.field, tt.msg)
			}
			if !strings.HasPrefix(err.Error(), "rls: f.yaml") {
				t.Errorf("Error() = %q, want it to start with the file", err.Error())
			}
		})
	}
}

// deep is a descriptors list nested n levels.
func deep(n int) string {
	var b strings.Builder
	b.WriteString("descriptors:\n")
	for i := range n {
		ind := strings.Repeat("  ", 2*i)
		b.WriteString(ind + "  - key: k\n" + ind + "    descriptors:\n")
	}
	return b.String()
}

// TestParseAccepts: files the reference accepts load, with its readings of
// YAML 1.1 (yes/no bools, any scalar as a string), aliases and merge keys,
// misplaced keys ignored with a warning.
func TestParseAccepts(t *testing.T) {
	c, err := parseOne(t, "ok.yaml", `
domain: d
descriptors:
  - key: k1
    value: 123
    shadow_mode: yes
    detailed_metric: off
    rate_limit: &base
      unit: Second
      requests_per_unit: 0x10
      name: first
  - key: k2
    rate_limit:
      <<: *base
      requests_per_unit: 7
      name: second
      replaces: [{name: first}]
  - key: k3
    unit: day          # ignored here, as by the reference
    rate_limit:
      unlimited: true
  - key: k4
    rate_limit:
  - key: k5
    value: "1.5"
    rate_limit: {unit: YEAR, requests_per_unit: 4294967295}
`)
	if err != nil {
		t.Fatal(err)
	}
	check := func(key, value string, want Rule) {
		t.Helper()
		m, ok := Lookup(c, "d", []KV{{key, value}})
		if !ok || m.Rule == nil {
			t.Fatalf("%s=%s: no rule", key, value)
		}
		got := *m.Rule
		got.Replaces = nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s=%s:\n got %+v\nwant %+v", key, value, got, want)
		}
	}
	check("k1", "123", Rule{FullKey: "d.k1_123", RequestsPerUnit: 16, Unit: UnitSecond, Name: "first", ShadowMode: true})
	check("k2", "x", Rule{FullKey: "d.k2", RequestsPerUnit: 7, Unit: UnitSecond, Name: "second"})
	check("k3", "x", Rule{FullKey: "d.k3", Unlimited: true})
	check("k5", "1.5", Rule{FullKey: "d.k5_1.5", RequestsPerUnit: 1<<32 - 1, Unit: UnitYear})
	if m, ok := Lookup(c, "d", []KV{{"k4", "x"}}); !ok || m.Rule != nil {
		t.Errorf("k4 (null rate_limit): %+v, want whitelisted", m)
	}
	if m, _ := Lookup(c, "d", []KV{{"k2", "x"}}); len(m.Rule.Replaces) != 1 || m.Rule.Replaces[0] != "first" {
		t.Errorf("k2 replaces %v", m.Rule.Replaces)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "ok.yaml:19: descriptors[2].unit: ignored") {
		t.Errorf("warnings %q, want one about descriptors[2].unit at line 19", c.Warnings)
	}
}

// TestParseDomains: one domain per file; a domain in two files is an
// error unless MergeDomains, which then rejects a descriptor defined twice.
func TestParseDomains(t *testing.T) {
	a := File{Name: "a.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 1}\n")}
	b := File{Name: "b.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: b\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")}
	other := File{Name: "c.yaml", Data: []byte("domain: e\n")}
	if _, err := Parse([]File{a, b}, Options{}); err == nil || !strings.Contains(err.Error(), "b.yaml:1: domain: duplicate domain 'd' in config file") {
		t.Errorf("duplicate domain: %v", err)
	}
	c, err := Parse([]File{a, b, other}, Options{MergeDomains: true})
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := Lookup(c, "d", []KV{{"b", "x"}}); m.Rule == nil || m.Rule.RequestsPerUnit != 2 {
		t.Errorf("merged domain: %+v", m)
	}
	if got := c.Domains(); len(got) != 2 || got[0] != "d" || got[1] != "e" {
		t.Errorf("Domains() = %v", got)
	}
	if _, err := Parse([]File{a, a}, Options{MergeDomains: true}); err == nil || !strings.Contains(err.Error(), "duplicate descriptor composite key 'd.a'") {
		t.Errorf("merged duplicate key: %v", err)
	}
}
