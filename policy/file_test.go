package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

func TestParseDuration(t *testing.T) {
	good := []struct {
		in   string
		want time.Duration
	}{
		{"1m", time.Minute},
		{"1h30m", 90 * time.Minute},
		{"500ms", 500 * time.Millisecond},
		{"1.5s", 1500 * time.Millisecond},
		{"0", 0},
		{"1d", 24 * time.Hour},
		{"7d", 7 * 24 * time.Hour},
		{"366d", bucket.MaxPeriod},
		{"+2d", 48 * time.Hour},
		{"-1d", -24 * time.Hour},
		{"-1m", -time.Minute},
		{"106751d", 106751 * 24 * time.Hour},
	}
	for _, tc := range good {
		got, err := ParseDuration(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	bad := []string{"", "d", "-d", "1", "60", "abc", "1.5d", "1d12h", "1 d", "1D", "106752d",
		"99999999999999999999d", "1w", "ms", "1e3s"}
	for _, in := range bad {
		got, err := ParseDuration(in)
		if err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, got)
			continue
		}
		if !errors.Is(err, ErrDuration) {
			t.Errorf("ParseDuration(%q) error %v does not wrap ErrDuration", in, err)
		}
	}
}

func TestParseValid(t *testing.T) {
	const file = `
allow_inline: true
policies:
  api:
    algorithm: token_bucket
    limit: 100
    period: 1m
    burst: 200
    failure_mode: local
  login:
    algorithm: fixed_window
    limit: 5
    period: 1m
    failure_mode: deny
  defaults:
    limit: 10
    period: 500ms
  log:
    algorithm: sliding_log
    limit: 10000
    period: 7d
    failure_mode: allow
  uploads:
    algorithm: concurrency
    limit: 4
  jobs:
    algorithm: concurrency
    limit: 2
    max_ttl: 2h
  "a.b:c-d_9":
    algorithm: sliding_window
    limit: 1
    period: 1h30m
    burst: ~
`
	s, err := Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if !s.AllowInline {
		t.Error("AllowInline = false")
	}
	want := map[string]Policy{
		"api":       {Name: "api", Limit: bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 100, Period: time.Minute, Burst: 200}},
		"login":     {Name: "login", Limit: bucket.Limit{Algorithm: bucket.FixedWindow, Limit: 5, Period: time.Minute}, FailureMode: FailDeny},
		"defaults":  {Name: "defaults", Limit: bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 10, Period: 500 * time.Millisecond}},
		"log":       {Name: "log", Limit: bucket.Limit{Algorithm: bucket.SlidingLog, Limit: 10000, Period: 7 * 24 * time.Hour}, FailureMode: FailAllow},
		"uploads":   {Name: "uploads", Limit: bucket.Limit{Algorithm: bucket.Concurrency, Limit: 4}},
		"jobs":      {Name: "jobs", Limit: bucket.Limit{Algorithm: bucket.Concurrency, Limit: 2}, MaxTTL: 2 * time.Hour},
		"a.b:c-d_9": {Name: "a.b:c-d_9", Limit: bucket.Limit{Algorithm: bucket.SlidingWindow, Limit: 1, Period: 90 * time.Minute}},
	}
	if s.Len() != len(want) {
		t.Errorf("Len = %d, want %d (%v)", s.Len(), len(want), s.Names())
	}
	for name, w := range want {
		got, ok := s.Lookup(name)
		if !ok {
			t.Errorf("policy %q missing", name)
			continue
		}
		if got != w {
			t.Errorf("policy %q = %+v, want %+v", name, got, w)
		}
	}
}

func TestParseEmptyAndDefaults(t *testing.T) {
	for _, in := range []string{"", "\n", "# only a comment\n", "---\n", "~", "null", "{}", "policies:\n", "policies: {}\n"} {
		s, err := Parse([]byte(in))
		if err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		if !s.AllowInline || s.Len() != 0 {
			t.Errorf("Parse(%q) = AllowInline %v, %d policies; want true, 0", in, s.AllowInline, s.Len())
		}
	}
	s, err := Parse([]byte("allow_inline: false\n"))
	if err != nil || s.AllowInline {
		t.Errorf("allow_inline: false -> %v, %v", s, err)
	}
}

func TestParseAliases(t *testing.T) {
	s, err := Parse([]byte(`
policies:
  a: &shared
    limit: 3
    period: 1s
  b: *shared
`))
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := s.Lookup("b"); !ok || p.Limit.Limit != 3 || p.Limit.Period != time.Second {
		t.Errorf("b = %+v, %v", p, ok)
	}
}

func TestParseInvalid(t *testing.T) {
	cases := []struct {
		name string
		file string
		want string // substring of the error
	}{
		{"limit zero", "policies:\n  api:\n    limit: 0\n    period: 1m\n", "policies.api.limit: must be > 0"},
		{"limit negative", "policies:\n  api:\n    limit: -1\n    period: 1m\n", "policies.api.limit: must be > 0"},
		{"limit missing", "policies:\n  api:\n    period: 1m\n", "policies.api.limit: must be > 0"},
		{"limit too big", "policies:\n  api:\n    limit: 1000000001\n    period: 1m\n", "policies.api.limit: must be <= 1000000000"},
		{"limit float", "policies:\n  api:\n    limit: 1.5\n    period: 1m\n", "line 3: policies.api.limit: must be an integer"},
		{"limit string", "policies:\n  api:\n    limit: \"100\"\n    period: 1m\n", "policies.api.limit: must be an integer"},
		{"limit overflow", "policies:\n  api:\n    limit: 99999999999999999999\n    period: 1m\n", "policies.api.limit: must be an integer"},
		{"limit mapping", "policies:\n  api:\n    limit: {a: 1}\n    period: 1m\n", "policies.api.limit: must be an integer"},
		{"sliding log limit", "policies:\n  log:\n    algorithm: sliding_log\n    limit: 10001\n    period: 1m\n", "policies.log.limit: must be <= 10000 for sliding_log"},
		{"period missing", "policies:\n  login:\n    algorithm: fixed_window\n    limit: 5\n", "policies.login.period: required for fixed_window"},
		{"period zero", "policies:\n  login:\n    limit: 5\n    period: 0s\n", "policies.login.period: must be > 0"},
		{"period negative", "policies:\n  login:\n    limit: 5\n    period: -1m\n", "policies.login.period: must be > 0"},
		{"period too long", "policies:\n  login:\n    limit: 5\n    period: 367d\n", "policies.login.period: must be <= 366 days"},
		{"period bad", "policies:\n  login:\n    limit: 5\n    period: abc\n", "line 4: policies.login.period: invalid duration \"abc\""},
		{"period unitless", "policies:\n  login:\n    limit: 5\n    period: 60\n", "policies.login.period: invalid duration"},
		{"period list", "policies:\n  login:\n    limit: 5\n    period: [1m]\n", "policies.login.period: must be a string"},
		{"burst negative", "policies:\n  api:\n    limit: 5\n    period: 1m\n    burst: -1\n", "policies.api.burst: must be >= 0"},
		{"burst wrong algorithm", "policies:\n  api:\n    algorithm: fixed_window\n    limit: 5\n    period: 1m\n    burst: 10\n", "policies.api.burst: only token_bucket takes a burst"},
		{"burst too slow", "policies:\n  api:\n    limit: 1\n    period: 366d\n    burst: 1000000000\n", "policies.api.burst: burst/limit"},
		{"unknown algorithm", "policies:\n  x:\n    algorithm: leaky\n    limit: 5\n    period: 1m\n", "policies.x.algorithm: unknown algorithm \"leaky\""},
		{"unknown failure mode", "policies:\n  x:\n    limit: 5\n    period: 1m\n    failure_mode: open\n", "policies.x.failure_mode: unknown failure mode \"open\""},
		{"max_ttl zero", "policies:\n  c:\n    algorithm: concurrency\n    limit: 5\n    max_ttl: 0s\n", "line 5: policies.c.max_ttl: invalid max_ttl \"0s\": want a duration in (0, 24h0m0s]"},
		{"max_ttl negative", "policies:\n  c:\n    algorithm: concurrency\n    limit: 5\n    max_ttl: -1m\n", "policies.c.max_ttl: invalid max_ttl \"-1m\""},
		{"max_ttl too long", "policies:\n  c:\n    algorithm: concurrency\n    limit: 5\n    max_ttl: 25h\n", "policies.c.max_ttl: invalid max_ttl \"25h\""},
		{"max_ttl bad", "policies:\n  c:\n    algorithm: concurrency\n    limit: 5\n    max_ttl: soon\n", "policies.c.max_ttl: invalid max_ttl \"soon\""},
		{"max_ttl number", "policies:\n  c:\n    algorithm: concurrency\n    limit: 5\n    max_ttl: 60\n", "policies.c.max_ttl: invalid max_ttl \"60\""},
		{"max_ttl list", "policies:\n  c:\n    algorithm: concurrency\n    limit: 5\n    max_ttl: [1m]\n", "policies.c.max_ttl: must be a string"},
		{"max_ttl of a token bucket", "policies:\n  api:\n    limit: 5\n    period: 1m\n    max_ttl: 1m\n", "line 5: policies.api.max_ttl: only concurrency takes a max_ttl, not token_bucket"},
		{"max_ttl long value", "policies:\n  c:\n    algorithm: concurrency\n    limit: 5\n    max_ttl: " + strings.Repeat("9", 5000) + "\n", "…(5000 bytes)"},
		{"long policy name", "policies:\n  " + strings.Repeat("p", 65) + ":\n    limit: 5\n    period: 1m\n", "invalid policy name"},
		{"unknown policy field", "policies:\n  api:\n    limit: 5\n    foo: 1\n    period: 1m\n", "line 4: field foo not found in policies.api"},
		{"unknown top field", "allow_inline: true\npolicy:\n  api: {}\n", "line 2: field policy not found"},
		{"allow_inline not bool", "allow_inline: yes\n", "allow_inline: must be true or false"},
		{"allow_inline list", "allow_inline: []\n", "allow_inline: must be true or false"},
		{"bad name", "policies:\n  \"a b\":\n    limit: 5\n    period: 1m\n", "line 2: policies: invalid policy name \"a b\""},
		{"long name", "policies:\n  " + strings.Repeat("a", 65) + ":\n    limit: 5\n    period: 1m\n", "invalid policy name"},
		{"null name", "policies:\n  ~:\n    limit: 5\n    period: 1m\n", "invalid policy name"},
		{"duplicate policy", "policies:\n  api: {limit: 1, period: 1s}\n  api: {limit: 2, period: 1s}\n", "line 3: policies.api: defined twice (first at line 2)"},
		{"duplicate field", "policies:\n  api: {limit: 1, period: 1s, limit: 2}\n", "policies.api.limit: already given"},
		{"duplicate top field", "policies: {}\npolicies: {}\n", "policies: already given"},
		{"policy not a mapping", "policies:\n  api: 5\n", "policies.api: must be a mapping"},
		{"policy null", "policies:\n  api:\n", "policies.api: must be a mapping"},
		{"policies a list", "policies:\n  - api\n", "policies: must be a mapping"},
		{"top-level list", "- a\n- b\n", "must be a mapping"},
		{"top-level scalar", "hello\n", "must be a mapping"},
		{"merge key", "base: &b {limit: 1}\n", "field base not found"},
		{"merge in policy", "policies:\n  a: &b {limit: 1, period: 1s}\n  c:\n    <<: *b\n", "merge keys (<<) are not supported"},
		{"syntax", "policies:\n  api: {limit: 1\n", "malformed YAML"},
		{"tabs", "policies:\n\tapi: {}\n", "malformed YAML"},
		{"two documents", "policies: {}\n---\npolicies: {}\n", "single YAML document"},
		{"complex key", "? [a]\n: 1\n", "keys must be plain strings"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.file))
			if err == nil {
				t.Fatalf("Parse succeeded (%v policies), want an error containing %q", s.Names(), tc.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Errorf("error %T is not a *FileError", err)
			}
		})
	}
}

func TestParseErrorFormat(t *testing.T) {
	_, err := Parse([]byte("policies:\n  api:\n    limit: 0\n    period: 1m\n"))
	if got, want := err.Error(), "policy: invalid: policies.api.limit: must be > 0"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	if !errors.Is(err, bucket.ErrInvalidLimit) {
		t.Errorf("error %v does not wrap bucket.ErrInvalidLimit", err)
	}
	_, err = Parse([]byte("policies:\n  x:\n    algorithm: leaky\n"))
	if !errors.Is(err, bucket.ErrUnknownAlgorithm) {
		t.Errorf("error %v does not wrap bucket.ErrUnknownAlgorithm", err)
	}
	_, err = Parse([]byte("policies:\n  x:\n    failure_mode: open\n"))
	if !errors.Is(err, ErrUnknownFailureMode) {
		t.Errorf("error %v does not wrap ErrUnknownFailureMode", err)
	}
}

func TestLoad(t *testing.T) {
	s, err := Load(filepath.Join("testdata", "policies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if s.AllowInline {
		t.Error("AllowInline = true, want false")
	}
	if got, want := strings.Join(s.Names(), ","), "api,daily,login,uploads"; got != want {
		t.Errorf("Names = %s, want %s", got, want)
	}
	if p, _ := s.Lookup("daily"); p.Limit.Period != 24*time.Hour || p.Limit.Algorithm != bucket.SlidingWindow {
		t.Errorf("daily = %+v", p)
	}

	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want ErrNotExist", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("policies:\n  api:\n    limit: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), "policies.api.limit") {
		t.Errorf("Load(bad) = %v", err)
	}
}

func TestValidName(t *testing.T) {
	for _, n := range []string{"a", "API", "user:42", "a.b-c_d", strings.Repeat("x", 64)} {
		if !ValidName(n) {
			t.Errorf("ValidName(%q) = false", n)
		}
	}
	for _, n := range []string{"", "a b", "a/b", "é", "\"", strings.Repeat("x", 65)} {
		if ValidName(n) {
			t.Errorf("ValidName(%q) = true", n)
		}
	}
}
