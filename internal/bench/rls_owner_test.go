package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// With Owner, each call goes to the owner of most of its descriptors'
// counter keys (the first on a tie), asked with the keys RLSCounterKey
// gives; an Owner error fails the call.
func TestRLSTargetToOwner(t *testing.T) {
	a := &countingRLS{limit: 100, counts: map[string]uint32{}}
	b := &countingRLS{limit: 100, counts: map[string]uint32{}}
	addrA, addrB := startRLS(t, a), startRLS(t, b)
	var asked []string
	owner := func(_ context.Context, key string) (string, error) {
		asked = append(asked, key)
		switch {
		case strings.HasPrefix(key, "bench_key_a"):
			return addrA, nil
		case strings.HasPrefix(key, "bench_key_b"):
			return addrB, nil
		}
		return "", errors.New("no owner")
	}
	tg, err := NewRLSTarget(RLSConfig{Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	allowed := make([]bool, 3)
	for _, c := range []struct {
		keys []string
		want *countingRLS
	}{
		{[]string{"a1"}, a}, {[]string{"b1"}, b}, {[]string{"a2", "b2", "b3"}, b}, {[]string{"b4", "a3"}, b}, {[]string{"a4", "b5", "a5"}, a},
	} {
		na, nb := len(a.counts), len(b.counts)
		if err := tg.Check(context.Background(), c.keys, allowed[:len(c.keys)]); err != nil {
			t.Fatal(err)
		}
		if got := c.want == a && len(a.counts) == na+len(c.keys) && len(b.counts) == nb ||
			c.want == b && len(b.counts) == nb+len(c.keys) && len(a.counts) == na; !got {
			t.Errorf("%v: went to the wrong server (a %d→%d, b %d→%d)", c.keys, na, len(a.counts), nb, len(b.counts))
		}
	}
	if asked[0] != "bench_key_a1_" {
		t.Errorf("Owner asked for %q, want the counter key bench_key_a1_", asked[0])
	}
	if err := tg.Check(context.Background(), []string{"c1"}, allowed[:1]); err == nil || !strings.Contains(err.Error(), "no owner") {
		t.Errorf("Check with no owner: %v", err)
	}
	if _, err := NewRLSTarget(RLSConfig{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no Addrs and no Owner: %v", err)
	}
}
