package ownership_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limiter/ownership"
)

func TestBadInputIsRefusedNamingTheField(t *testing.T) {
	base := testEpoch(t, 0, nil)
	other := testEpoch(t, 1, nil, "x")
	good := ownership.Config{Self: "a", DeadOwnerWait: testWait}
	for _, tc := range []struct {
		name  string
		cfg   ownership.Config
		base  ownership.Epoch
		field string
	}{
		{"no self", ownership.Config{}, base, "Self"},
		{"negative wait", ownership.Config{Self: "a", DeadOwnerWait: -1}, base, "DeadOwnerWait"},
		{"negative queue", ownership.Config{Self: "a", QueueLimit: -1}, base, "QueueLimit"},
		{"no ring", good, ownership.Epoch{}, "base.Ring"},
		{"heirs of another ring", good, ownership.Epoch{Ring: base.Ring, Heirs: other.Heirs}, "base.Heirs"},
		{"self a member", ownership.Config{Self: "x"}, other, "Self"},
	} {
		_, err := ownership.New(tc.cfg, tc.base)
		if !errors.Is(err, ownership.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("New, %s: %v, want ErrInvalidConfig naming %s", tc.name, err, tc.field)
		}
	}

	m, err := ownership.New(good, base)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		e     ownership.Epoch
		field string
	}{
		{"not the next", ownership.Epoch{Number: 2, Ring: other.Ring}, "Number"},
		{"no ring", ownership.Epoch{Number: 1}, "Ring"},
		{"heirs of another ring", ownership.Epoch{Number: 1, Ring: base.Ring, Heirs: other.Heirs}, "Heirs"},
		{"bad removal", ownership.Epoch{Number: 1, Ring: other.Ring, Removed: map[string]ownership.Removal{"y": 7}}, "Removed"},
	} {
		err := m.ApplyEpoch(tc.e, time.Unix(0, 0))
		if !errors.Is(err, ownership.ErrInvalidEpoch) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("ApplyEpoch, %s: %v, want ErrInvalidEpoch naming %s", tc.name, err, tc.field)
		}
	}
	if m.Epoch() != 0 {
		t.Fatalf("a refused epoch was applied: at %d", m.Epoch())
	}

	ok := ownership.Message{Kind: ownership.MsgAck, From: "b", To: "a", Partition: 1, For: 1}
	for _, tc := range []struct {
		name  string
		edit  func(*ownership.Message)
		field string
	}{
		{"to another", func(m *ownership.Message) { m.To = "z" }, "To"},
		{"from nobody", func(m *ownership.Message) { m.From = "" }, "From"},
		{"unknown kind", func(m *ownership.Message) { m.Kind = 99 }, "Kind"},
		{"no kind", func(m *ownership.Message) { m.Kind = 0 }, "Kind"},
		{"negative partition", func(m *ownership.Message) { m.Partition = -1 }, "Partition"},
		{"partition too large", func(m *ownership.Message) { m.Partition = 64 }, "Partition"},
		{"no handoff epoch", func(m *ownership.Message) { m.For = 0 }, "For"},
	} {
		msg := ok
		tc.edit(&msg)
		err := m.Step(msg)
		if !errors.Is(err, ownership.ErrInvalidMessage) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Step, %s: %v, want ErrInvalidMessage naming %s", tc.name, err, tc.field)
		}
	}
	if err := m.Step(ok); err != nil {
		t.Fatalf("Step of a good message: %v", err)
	}
}
