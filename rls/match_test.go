package rls

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// matchConfig exercises every matching rule.
const matchConfig = `
domain: web
descriptors:
  # A key/value with no limit of its own, and two levels below it.
  - key: tenant
    value: acme
    descriptors:
      - key: user            # key-only default at depth 2
        rate_limit: {unit: second, requests_per_unit: 5}
      - key: user            # key+value overrides it
        value: root
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: path                # key-only default at depth 1
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: path
    value: /login            # overrides the default
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: path
    value: /health           # whitelisted: no rate_limit
  - key: path
    value: /api/*            # wildcard: first match in file order
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: path
    value: /a*
    rate_limit: {unit: hour, requests_per_unit: 200}
  - key: region
    value: eu
    rate_limit: {unit: day, requests_per_unit: 15}
    descriptors:
      - key: zone
        value: one
        rate_limit: {unit: day, requests_per_unit: 25}
  - key: ip
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 70}
  - key: method
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 60}
  - key: file
    value: docs/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 50}
  - key: svc
    value: s-*
    share_threshold: true
    descriptors:
      - key: op
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 80}
`

// TestLookup: each of the reference's matching rules, with the rule found,
// the metric key (StatsKey) and the counter key.
func TestLookup(t *testing.T) {
	c, err := parseOne(t, "web.yaml", matchConfig)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		rpu     uint32 // 0 with fullKey "" means no rule
		fullKey string
		stats   string
		counter string
	}
	tests := []struct {
		name    string
		domain  string
		entries string // "k=v,k=v"
		want    want
	}{
		{"unknown key", "web", "nope=x", want{}},
		{"no limit at depth 1", "web", "tenant=acme", want{}},
		{"key-only default at depth 2", "web", "tenant=acme,user=bob",
			want{5, "web.tenant_acme.user", "web.tenant_acme.user", "web_tenant_acme_user_bob_"}},
		{"key+value overrides default", "web", "tenant=acme,user=root",
			want{10, "web.tenant_acme.user_root", "web.tenant_acme.user_root", "web_tenant_acme_user_root_"}},
		{"value of depth 1 unknown", "web", "tenant=other,user=bob", want{}},
		{"key-only default", "web", "path=/x", want{20, "web.path", "web.path", "web_path_/x_"}},
		{"exact value", "web", "path=/login", want{3, "web.path_/login", "web.path_/login", "web_path_/login_"}},
		{"whitelisted", "web", "path=/health", want{}},
		{"wildcard", "web", "path=/api/v1", want{100, "web.path_/api/*", "web.path_/api/*", "web_path_/api/v1_"}},
		{"first wildcard wins", "web", "path=/api/", want{100, "web.path_/api/*", "web.path_/api/*", "web_path_/api/_"}},
		{"second wildcard", "web", "path=/about", want{200, "web.path_/a*", "web.path_/a*", "web_path_/about_"}},
		{"deeper than the rule", "web", "path=/login,user=x", want{}},
		{"rule at depth 1, request at depth 1", "web", "region=eu", want{15, "web.region_eu", "web.region_eu", "web_region_eu_"}},
		{"rule at depth 2", "web", "region=eu,zone=one", want{25, "web.region_eu.zone_one", "web.region_eu.zone_one", "web_region_eu_zone_one_"}},
		{"depth 2 unknown value", "web", "region=eu,zone=two", want{}},
		{"detailed metric", "web", "ip=10.0.0.1", want{70, "web.ip", "web.ip_10.0.0.1", "web_ip_10.0.0.1_"}},
		{"value to metric", "web", "method=GET", want{60, "web.method", "web.method_GET", "web_method_GET_"}},
		{"share threshold", "web", "file=docs/a.pdf", want{50, "web.file_docs/*", "web.file_docs/*", "web_file_docs/*_"}},
		{"share threshold nested, detailed", "web", "svc=s-1,op=get",
			want{80, "web.svc_s-*.op", "web.svc_s-*.op_get", "web_svc_s-*_op_get_"}},
		{"empty value is a value", "web", "path=", want{20, "web.path", "web.path", "web_path__"}},
		{"no entries", "web", "", want{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var entries []KV
			if tt.entries != "" {
				for kv := range strings.SplitSeq(tt.entries, ",") {
					k, v, _ := strings.Cut(kv, "=")
					entries = append(entries, KV{k, v})
				}
			}
			m, ok := Lookup(c, tt.domain, entries)
			if !ok {
				t.Fatalf("domain %q unknown", tt.domain)
			}
			if tt.want.fullKey == "" {
				if m.Rule != nil {
					t.Fatalf("matched %+v, want no rule", m.Rule)
				}
				return
			}
			if m.Rule == nil {
				t.Fatalf("no rule, want %s", tt.want.fullKey)
			}
			if m.Rule.RequestsPerUnit != tt.want.rpu || m.Rule.FullKey != tt.want.fullKey || m.StatsKey != tt.want.stats {
				t.Errorf("got rule %d %q stats %q, want %d %q stats %q", m.Rule.RequestsPerUnit, m.Rule.FullKey, m.StatsKey,
					tt.want.rpu, tt.want.fullKey, tt.want.stats)
			}
			if got := CounterKey(tt.domain, entries, m.Shared); got != tt.want.counter {
				t.Errorf("counter key %q, want %q", got, tt.want.counter)
			}
		})
	}
	if _, ok := Lookup(c, "other", []KV{{"path", "/x"}}); ok {
		t.Error("an unknown domain was known")
	}
}

// TestLookupValueToMetricAndShare: the metric keys of value_to_metric and
// share_threshold at several levels, as the reference composes them.
func TestLookupValueToMetricAndShare(t *testing.T) {
	c, err := parseOne(t, "m.yaml", `
domain: d
descriptors:
  - key: k1
    value_to_metric: true
    descriptors:
      - key: k2
        descriptors:
          - key: k3
            rate_limit: {unit: minute, requests_per_unit: 1}
  - key: route
    value: api/*
    share_threshold: true
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: minute, requests_per_unit: 60}
  - key: wild
    value: foo*
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 20}
`)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		entries []KV
		stats   string
		shared  []string
	}{
		{[]KV{{"k1", "A"}, {"k2", "B"}, {"k3", "C"}}, "d.k1_A.k2.k3", nil},
		// share_threshold wins over value_to_metric: the pattern, not the value.
		{[]KV{{"route", "api/users"}, {"method", "GET"}}, "d.route_api/*.method", []string{"api/*", ""}},
		// value_to_metric on a wildcard: the full runtime value.
		{[]KV{{"wild", "foo42"}}, "d.wild_foo42", nil},
	}
	for i, tt := range tests {
		m, _ := Lookup(c, "d", tt.entries)
		if m.Rule == nil || m.StatsKey != tt.stats || !slices.Equal(m.Shared, tt.shared) {
			t.Errorf("step %d: %+v, want stats %q shared %q", i, m, tt.stats, tt.shared)
		}
	}
}

func TestOverrideKey(t *testing.T) {
	for _, tt := range []struct {
		entries []KV
		want    string
	}{
		{[]KV{{"a", "1"}, {"b", ""}}, "d.a_1.b"},
		{nil, "d."},
	} {
		if got := OverrideKey("d", tt.entries); got != tt.want {
			t.Errorf("OverrideKey(%v) = %q, want %q", tt.entries, got, tt.want)
		}
	}
}

func TestUnits(t *testing.T) {
	for _, tt := range []struct {
		name    string
		unit    Unit
		divider int64
	}{
		{"second", UnitSecond, 1}, {"MINUTE", UnitMinute, 60}, {"Hour", UnitHour, 3600},
		{"day", UnitDay, 86400}, {"week", UnitWeek, 7 * 86400}, {"month", UnitMonth, 30 * 86400},
		{"year", UnitYear, 365 * 86400},
	} {
		u, ok := ParseUnit(tt.name)
		if !ok || u != tt.unit || u.Divider() != tt.divider || u.Period().Seconds() != float64(tt.divider) {
			t.Errorf("%s: %v %v divider %d", tt.name, u, ok, u.Divider())
		}
	}
	for _, bad := range []string{"", "unknown", "fortnight"} {
		if _, ok := ParseUnit(bad); ok {
			t.Errorf("ParseUnit(%q) accepted", bad)
		}
	}
	// duration_until_reset: whole seconds to the end of the epoch-aligned
	// window, a full unit at its very start.
	at := time.Date(2026, 3, 1, 12, 0, 10, 500e6, time.UTC)
	for _, tt := range []struct {
		unit Unit
		at   time.Time
		want int64
	}{
		{UnitMinute, at, 50}, {UnitSecond, at, 1}, {UnitHour, at, 3590},
		{UnitMinute, at.Truncate(time.Minute), 60}, {UnitDay, at, 86400 - 12*3600 - 10},
	} {
		if got := tt.unit.ResetAfter(tt.at); got != tt.want {
			t.Errorf("%v.ResetAfter(%v) = %d, want %d", tt.unit, tt.at, got, tt.want)
		}
	}
	if UnitUnknown.Divider() != 0 || Unit(99).Divider() != 0 || Unit(99).String() != "UNKNOWN" {
		t.Error("an unknown unit has a divider")
	}
}
