package cluster

import (
	"errors"
	"testing"
	"time"
)

// The suspicion logic alone, on a fake clock: a member is suspect once it
// has left SuspectAfterProbes probes unanswered over at least the window;
// any ack, however late, makes it alive again; when every member (two or
// more) would be suspect, none is; a forgotten member starts afresh.
func TestSuspicionRules(t *testing.T) {
	const every, window = 150 * time.Millisecond, 550 * time.Millisecond
	now := time.Unix(1_700_000_000, 0)
	s := newSuspicion(2, window, func() time.Time { return now })
	// round sends a probe to each of names after every, then evaluates.
	round := func(names ...string) bool {
		now = now.Add(every)
		for _, n := range names {
			s.sent(n)
		}
		return s.evaluate()
	}
	want := func(name string, suspect bool) {
		t.Helper()
		if got := s.suspect(name); got != suspect {
			t.Fatalf("at +%v: suspect(%s) = %v, want %v", now.Sub(time.Unix(1_700_000_000, 0)), name, got, suspect)
		}
	}

	// a answers every probe; b answers until the fifth round, then goes
	// silent; c answers late (400ms after each probe), which is not
	// silence.
	for i := range 5 {
		round("a", "b", "c")
		s.acked("a")
		s.acked("b")
		if i >= 3 {
			s.acked("c")
		}
	}
	want("b", false)
	want("c", false)
	changed := false
	for range 3 { // 450ms of silence from b: not yet
		changed = changed || round("a", "b", "c")
		s.acked("a")
		s.acked("c")
	}
	if changed {
		t.Fatal("a suspicion changed within the window")
	}
	want("b", false)
	if !round("a", "b", "c") { // 600ms
		t.Fatal("b silent for 600ms and 4 probes, not suspected")
	}
	want("b", true)
	want("a", false)
	want("c", false)
	if !s.acked("b") {
		t.Fatal("b's late ack did not end its suspicion")
	}
	want("b", false)
	if s.acked("b") {
		t.Fatal("a second ack reported a change")
	}

	// Silence is not enough without probes: a member probed once, long
	// ago, is not suspected (this node did not ask).
	now = now.Add(time.Hour)
	s.sent("d")
	now = now.Add(time.Second)
	s.acked("a")
	s.acked("b")
	s.acked("c")
	if s.evaluate() {
		t.Fatal("d suspected after a single probe")
	}
	s.acked("d")

	// Everyone silent: this node's own problem, no one is suspected.
	for range 5 {
		if round("a", "b", "c", "d") {
			t.Fatal("a suspicion while every member was silent")
		}
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		want(n, false)
	}
	// One answers: the others are suspect.
	s.acked("a")
	if !s.evaluate() {
		t.Fatal("no suspicion of the silent members once one answered")
	}
	want("a", false)
	want("b", true)

	// A member that went away starts afresh when it comes back; an ack of
	// a member not probed is ignored.
	s.forget("b")
	want("b", false)
	if s.acked("b") {
		t.Fatal("an ack of a forgotten member reported a change")
	}
	if _, ok := s.states["b"]; ok {
		t.Fatal("an ack of a member not probed created its state")
	}
	s.keepOnly(map[string]bool{"a": true})
	if len(s.states) != 1 || s.states["a"] == nil {
		t.Fatalf("keepOnly(a) kept %d states", len(s.states))
	}
}

// Probe messages round-trip; anything else is an error naming what is
// wrong.
func TestProbeMessages(t *testing.T) {
	for _, m := range []probeMsg{{kind: probePing, addr: "127.0.0.1:7946", to: "node-2", from: "node-1"},
		{kind: probePing, addr: "[::1]:7946", to: "m", from: "n"}, {kind: probeAck, from: "node-1"}} {
		got, err := decodeProbe(encodeProbe(m))
		if err != nil || got != m {
			t.Fatalf("decode(encode(%+v)) = %+v, %v", m, got, err)
		}
	}
	ping := func(addr, to, name string) []byte {
		return encodeProbe(probeMsg{kind: probePing, addr: addr, to: to, from: name})
	}
	for _, bad := range [][]byte{nil, {probeMagic, probePing}, {0, probePing, 0, 0, 'x'}, {probeMagic, 'z', 0, 0, 'x'},
		{probeMagic, probeAck, 9, 'x'}, {probeMagic, probeAck, 0}, {probeMagic, probeAck, 0, 5, 'x'},
		ping("", "m", "n"), ping("10.0.0.1", "m", "n"), ping("10.0.0.1:0", "m", "n"),
		ping("host:7946", "m", "n"), ping("010.0.0.1:7946", "m", "n"), ping("10.0.0.1:7946", "m", ""),
		ping("10.0.0.1:7946", "", "n"),
		encodeProbe(probeMsg{kind: probeAck, addr: "10.0.0.1:7946", from: "n"}),
		encodeProbe(probeMsg{kind: probeAck, to: "m", from: "n"}),
		encodeProbe(probeMsg{kind: probeAck, from: string(make([]byte, probeMaxName+1))})} {
		if _, err := decodeProbe(bad); !errors.Is(err, errProbe) {
			t.Errorf("decode(%q) = %v, want errProbe", bad, err)
		}
	}
}
