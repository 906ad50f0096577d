package wire

import "testing"

func TestInflight(t *testing.T) {
	var tab Inflight[string]
	if _, ok := tab.Remove(0); ok || tab.Len() != 0 {
		t.Fatal("an empty table holds something")
	}
	for i, e := range []string{"a", "b", "c"} {
		if id := tab.Add(e); id != uint64(i) {
			t.Fatalf("Add %q: id %d, want %d", e, id, i)
		}
	}
	if e, ok := tab.Remove(1); !ok || e != "b" || tab.Len() != 2 {
		t.Fatalf("Remove 1: %q, %v, len %d; want b, true, 2", e, ok, tab.Len())
	}
	if _, ok := tab.Remove(1); ok {
		t.Fatal("Remove 1 twice found it again")
	}
	m := tab.Drain()
	if len(m) != 2 || m[0] != "a" || m[2] != "c" || tab.Len() != 0 {
		t.Fatalf("Drain: %v, len %d after", m, tab.Len())
	}
	if _, ok := tab.Remove(2); ok {
		t.Fatal("a drained id is still found")
	}
	if id := tab.Add("d"); id != 3 {
		t.Fatalf("Add after Drain: id %d, want 3 (ids are never reused)", id)
	}
}
