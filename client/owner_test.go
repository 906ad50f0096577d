package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
)

// TestOwner: Owner names the node that answers a check of the key as its
// owner, for inline limits of each algorithm and period; without routing,
// or for a policy the cluster lacks, it is ErrNoOwner; before the first
// membership answer, a done context ends the wait.
func TestOwner(t *testing.T) {
	tc := newCluster(t, 3)
	c := newClient(t, client.Config{Addrs: tc.addrs()[:1]})
	plain := newClient(t, client.Config{Addrs: tc.addrs()[1:2], DisableRouting: true})
	owners := map[string]bool{}
	for i := range 30 {
		key := fmt.Sprintf("acct:%d", i)
		for _, lim := range []client.Limit{hourly, {Algorithm: client.FixedWindowHits, Limit: 5, Period: time.Minute}} {
			m, err := c.Owner(context.Background(), key, "", lim)
			if err != nil {
				t.Fatal(err)
			}
			res, err := plain.Usage(context.Background(), key, "", lim)
			if err != nil || res.Err != nil {
				t.Fatalf("usage %s: %v %v", key, err, res.Err)
			}
			if m.Name != res.Owner {
				t.Fatalf("Owner(%s, %v) = %s, the nodes say %s", key, lim, m.Name, res.Owner)
			}
			found := false
			for _, n := range tc.nodes {
				found = found || (n.Name() == m.Name && n.GRPCAddr() == m.GRPCAddr)
			}
			if !found {
				t.Fatalf("Owner(%s) = %+v, not a node's name and address", key, m)
			}
			owners[m.Name] = true
		}
	}
	if len(owners) != 3 {
		t.Errorf("60 buckets owned by %v, want all 3 nodes", owners)
	}

	for _, tt := range []struct {
		name   string
		c      *client.Client
		policy string
	}{
		{"routing disabled", plain, ""},
		{"unknown policy", c, "no-such-policy"},
	} {
		if _, err := tt.c.Owner(context.Background(), "k", tt.policy, hourly); !errors.Is(err, client.ErrNoOwner) {
			t.Errorf("%s: %v, want ErrNoOwner", tt.name, err)
		}
	}

	// Nothing listening: the first membership answer never comes.
	dead := newClient(t, client.Config{Addrs: []string{"127.0.0.1:1"}, Timeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := dead.Owner(ctx, "k", "", hourly); err == nil {
		t.Error("Owner with no node reachable: no error")
	}
}
