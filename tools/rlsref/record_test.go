package main

import (
	"strings"
	"testing"
	"time"
)

// A step must be sent and answered in one second, and in the second the
// case wants: the one before's, or the next with next_second.
func TestStepTiming(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(sec int64, ms int) time.Time {
		return t0.Add(time.Duration(sec)*time.Second + time.Duration(ms)*time.Millisecond)
	}
	s := t0.Unix()
	for i, c := range []struct {
		sent, received time.Time
		prev           int64
		next           bool
		err            string
	}{
		{at(0, 30), at(0, 31), 0, false, ""},
		{at(0, 999), at(1, 1), 0, false, "boundary"},
		{at(0, 40), at(0, 41), s, false, ""},
		{at(1, 40), at(1, 41), s, false, "not in"},
		{at(1, 30), at(1, 31), s, true, ""},
		{at(2, 30), at(2, 31), s, true, "not the one after"},
		{at(5, 30), at(5, 31), 0, true, ""}, // a first step with next_second
	} {
		err := stepTiming(answer{Sent: c.sent, Received: c.received}, c.prev, c.next)
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("step %d: %v, want %q", i, err, c.err)
		}
	}
}

// Every committed case loads: a config directory, steps and requests that
// protojson accepts; --only names cases that exist.
func TestLoadCommittedCases(t *testing.T) {
	const dir = "../../node/testdata/rls-conformance"
	cases, err := loadCases(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 20 {
		t.Fatalf("%d cases", len(cases))
	}
	for _, c := range cases {
		if len(c.Requests) != len(c.File.Steps) || c.File.Description == "" || c.File.Semantics == "" {
			t.Errorf("%s: %d requests for %d steps, description %q, semantics %q", c.Name, len(c.Requests), len(c.File.Steps), c.File.Description, c.File.Semantics)
		}
	}
	if _, err := loadCases(dir, []string{"no_such_case"}); err == nil || !strings.Contains(err.Error(), "no_such_case") {
		t.Errorf("--only no_such_case: %v", err)
	}
}
