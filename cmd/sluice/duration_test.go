package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
)

func TestHumanDuration(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{29965512730 * time.Nanosecond, "29.966s"},
		{30 * time.Second, "30s"},
		{29999600 * time.Microsecond, "30s"},
		{time.Hour + 500*time.Millisecond, "1h0m0.5s"},
		{1500 * time.Microsecond, "2ms"},
		{400 * time.Microsecond, "1ms"}, // positive: never "0s"
		{0, "0s"},
	} {
		if got := humanDuration(tc.in); got != tc.want {
			t.Errorf("humanDuration(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// What check and usage print to people rounds durations to the millisecond.
func TestPrintResultRoundsDurations(t *testing.T) {
	r := client.Result{Limit: 10, Remaining: 0, RetryAfter: 29965512730 * time.Nanosecond,
		ResetAfter: 59965512730 * time.Nanosecond, Source: "owner", Owner: "a"}
	for _, tc := range []struct {
		allowed, read bool
		want          string
	}{
		{false, false, "denied: retry after 29.966s, remaining 0 of 10 (source owner, owner a)\n"},
		{true, false, "allowed: remaining 0 of 10, refills fully in 59.966s (source owner, owner a)\n"},
		{false, true, "k: used 10 of 10, remaining 0 (a check of 1 would be denied), refills fully in 59.966s (source owner, owner a)\n"},
	} {
		r.Allowed = tc.allowed
		var b bytes.Buffer
		if err := printResult(&b, false, "k", r, tc.read, "refills fully in"); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("printResult(allowed %v, read %v) = %q, want %q", tc.allowed, tc.read, b.String(), tc.want)
		}
	}
	// --json is for programs: the exact durations.
	var b bytes.Buffer
	if err := printResult(&b, true, "k", r, false, "refills fully in"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"retry_after":"29.96551273s"`) {
		t.Errorf("--json: %s, want the exact retry_after", b.String())
	}
}

// What reset_after is the time until, said per algorithm: after one check
// of 10/h, a token bucket refills fully in 6m (one unit's refill), while a
// fixed window ends at the hour.
func TestCheckResetWording(t *testing.T) {
	s := startServer(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--algorithm", "token_bucket"}, "allowed: remaining 9 of 10, refills fully in 6m0s"},
		{[]string{"--algorithm", "fixed_window"}, "allowed: remaining 9 of 10, window ends in "},
		{[]string{"--algorithm", "sliding_log"}, "allowed: remaining 9 of 10, window empties in 1h0m0s"},
		{[]string{"--algorithm", "sliding_window"}, "allowed: remaining 9 of 10, window empties in 1h"},
	} {
		args := append([]string{"check", "--addr", s.grpc, "wording:" + tc.args[1], "--limit", "10", "--period", "1h"}, tc.args...)
		code, out := sluice(t, args...)
		if code != 0 || !strings.HasPrefix(out, tc.want) {
			t.Errorf("%v: exit %d, output %q; want it to start %q", tc.args, code, out, tc.want)
		}
	}
}
