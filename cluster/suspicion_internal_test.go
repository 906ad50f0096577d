package cluster

import (
	"testing"
	"time"
)

// The suspicion logic alone, on a fake clock: SuspectAfterProbes failed
// probes in a row and at least silent without an answer make a member
// suspect; one answer makes it alive again; a forgotten member starts
// afresh.
func TestSuspicionRules(t *testing.T) {
	const interval = 300 * time.Millisecond
	now := time.Unix(1_700_000_000, 0)
	s := newSuspicion(2, interval+250*time.Millisecond, func() time.Time { return now })
	step := func(name string, answered, wantChanged, wantSuspect bool) {
		t.Helper()
		now = now.Add(interval)
		if got := s.record(name, answered); got != wantChanged {
			t.Fatalf("record(%s, %v) changed = %v, want %v", name, answered, got, wantChanged)
		}
		if got := s.suspect(name); got != wantSuspect {
			t.Fatalf("suspect(%s) = %v, want %v", name, got, wantSuspect)
		}
	}

	// Never answered: silent since its first probe.
	now = now.Add(-interval)
	s.record("mute", false)           // the first probe, at the same moment
	step("mute", false, false, false) // two misses, but 300ms of silence
	step("mute", false, true, true)

	step("a", true, false, false)
	step("a", false, false, false) // one miss is not enough
	step("a", true, false, false)  // and an answer resets the count
	step("a", false, false, false)
	step("a", false, true, true) // two misses in a row, 600ms of silence
	step("a", false, false, true)
	step("a", true, true, false) // alive at its first answer
	step("a", true, false, false)

	// Two misses in quick succession (rounds that bunched up behind a
	// stalled prober) are not enough: silence must last too.
	now = now.Add(interval)
	s.record("b", true)
	s.record("b", false)
	if s.record("b", false) || s.suspect("b") {
		t.Fatal("b suspect after two misses within 0s of its last answer")
	}
	now = now.Add(interval + 250*time.Millisecond)
	if !s.record("b", false) || !s.suspect("b") {
		t.Fatal("b not suspect after three misses and 550ms of silence")
	}

	// A member that went away starts afresh when it comes back.
	s.forget("b")
	if s.suspect("b") {
		t.Fatal("forgotten b is still suspect")
	}
	step("b", false, false, false) // one miss since it came back
	s.keepOnly(func(name string) bool { return name == "b" })
	if s.suspect("mute") || len(s.states) != 1 {
		t.Fatalf("keepOnly(b) kept %d states", len(s.states))
	}
}
