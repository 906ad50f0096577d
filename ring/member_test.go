package ring

import (
	"strconv"
	"testing"
)

// TestVnodeKeysUnambiguous checks that no two members share a virtual-node
// key, for names where plain concatenation ("sluice-1"+"23" ==
// "sluice-12"+"3") would collide.
func TestVnodeKeysUnambiguous(t *testing.T) {
	const rf = 200
	ms := sluices(150)
	plain, prefixed := map[string]string{}, map[string]string{}
	plainCollisions := 0
	for _, m := range ms {
		for i := range rf {
			k := m.Name + strconv.Itoa(i)
			if other, dup := plain[k]; dup && other != m.Name {
				plainCollisions++
			}
			plain[k] = m.Name
			k = vnodePrefix(m.Name) + strconv.Itoa(i)
			if other, dup := prefixed[k]; dup {
				t.Fatalf("virtual-node key %q of %s is also %s's", k, m.Name, other)
			}
			prefixed[k] = m.Name
		}
	}
	if plainCollisions == 0 {
		t.Fatal("plain concatenation shows no collision: the test proves nothing")
	}
	t.Logf("plain name+index keys would collide %d times; length-prefixed keys never do", plainCollisions)
}

func TestVnodePrefix(t *testing.T) {
	for name, want := range map[string]string{
		"sluice-0": "8:sluice-0",
		"a:b":      "3:a:b",
		"é":        "2:é",
	} {
		if got := vnodePrefix(name); got != want {
			t.Errorf("vnodePrefix(%q) = %q, want %q", name, got, want)
		}
	}
}
