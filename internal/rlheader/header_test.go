package rlheader

import (
	"net/http"
	"testing"
	"time"
)

func TestSet(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Item
		want map[string]string
	}{
		{"allow", Item{Name: "api", Allowed: true, Limit: 100, Remaining: 99, Period: time.Minute, ResetAfter: 600 * time.Millisecond},
			map[string]string{"RateLimit-Policy": `"api";q=100;w=60`, "RateLimit": `"api";r=99;t=1`,
				"RateLimit-Limit": "100", "RateLimit-Remaining": "99", "RateLimit-Reset": "1", "Retry-After": ""}},
		{"deny rounds up", Item{Limit: 2, Period: 1500 * time.Millisecond, ResetAfter: 2*time.Second + 1, RetryAfter: time.Nanosecond},
			map[string]string{"RateLimit-Policy": `"default";q=2;w=2`, "RateLimit": `"default";r=0;t=3`, "Retry-After": "1"}},
		{"no period, negative remaining, odd name", Item{Name: "a\"b\\c\n\u00e9", Allowed: true, Limit: 5, Remaining: -3},
			map[string]string{"RateLimit-Policy": `"a\"b\\c???";q=5`, "RateLimit": `"a\"b\\c???";r=0;t=0`, "RateLimit-Remaining": "0"}},
		{"burst above the quota", Item{Allowed: true, Limit: 100, Burst: 200, Remaining: 199, Period: time.Minute},
			map[string]string{"RateLimit-Policy": `"default";q=100;w=60;sluice-burst=200`, "RateLimit-Limit": "100", "RateLimit-Remaining": "199"}},
		{"burst equal to the quota is not sent", Item{Allowed: true, Limit: 100, Burst: 100, Period: time.Minute},
			map[string]string{"RateLimit-Policy": `"default";q=100;w=60`}},
		{"sub-second period is w=1", Item{Allowed: true, Limit: 1, Period: time.Millisecond},
			map[string]string{"RateLimit-Policy": `"default";q=1;w=1`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			Set(h, &tc.in)
			for k, v := range tc.want {
				if got := h.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestMoreRestrictive(t *testing.T) {
	deny := func(retry time.Duration) *Item { return &Item{RetryAfter: retry} }
	allow := func(rem int64, reset time.Duration) *Item {
		return &Item{Allowed: true, Remaining: rem, ResetAfter: reset}
	}
	for _, tc := range []struct {
		name string
		a, b *Item
		want bool
	}{
		{"deny beats allow", deny(0), allow(0, 0), true},
		{"allow loses to deny", allow(0, 0), deny(0), false},
		{"longer retry", deny(2), deny(1), true},
		{"fewer remaining", allow(1, 0), allow(2, 9), true},
		{"longer reset", allow(1, 2), allow(1, 1), true},
		{"equal", allow(1, 1), allow(1, 1), false},
	} {
		if got := MoreRestrictive(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Set writes the keys http.Header.Set would (canonical), in two
// allocations, and a header added to afterwards leaves the others alone
// (each value is a full one-element slice of a shared array).
func TestSetKeysAllocsAndAdd(t *testing.T) {
	for _, k := range []string{keyPolicy, keyRateLimit, keyLimit, keyRemaining, keyReset, keyRetryAfter} {
		if c := http.CanonicalHeaderKey(k); c != k {
			t.Errorf("key %q is not canonical (%q)", k, c)
		}
	}
	it := Item{Name: "api", Limit: 100, Remaining: 0, Period: time.Minute, ResetAfter: time.Second, RetryAfter: time.Second}
	h := http.Header{}
	if n := testing.AllocsPerRun(100, func() { Set(h, &it) }); n > 2 {
		t.Errorf("Set: %v allocations, want at most 2", n)
	}
	h.Add("RateLimit-Limit", "extra")
	if got := h.Values("RateLimit-Limit"); len(got) != 2 || got[0] != "100" || got[1] != "extra" {
		t.Errorf("RateLimit-Limit = %q after Add", got)
	}
	if got := h.Get("RateLimit-Remaining"); got != "0" {
		t.Errorf("RateLimit-Remaining = %q after an Add to RateLimit-Limit, want 0", got)
	}
	if got := h.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1", got)
	}
}
