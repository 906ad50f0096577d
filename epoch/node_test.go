package epoch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// chanNet is a Transport between Nodes: each Send goes to the receivers'
// Step at once (Step never blocks).
type chanNet struct {
	mu    sync.Mutex
	nodes map[string]*Node
}

func (c *chanNet) Send(msgs []Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		if n, ok := c.nodes[m.To.Name]; ok {
			n.Step(m)
		}
	}
}

// TestRunForms a group of three Nodes driven by their own Run loops, on
// synctest's fake clock: every node's OnEpoch sees the same three joins,
// each holds a lease, and Run returns when its context ends.
func TestRunFormsAGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := &chanNet{nodes: map[string]*Node{}}
		var mu sync.Mutex
		got := map[string][]Epoch{}
		var nodes []*Node
		for i := range 3 {
			name := fmt.Sprintf("n%d", i+1)
			cfg := FastConfig(name, name+":7946")
			cfg.BootstrapExpect = 3
			cfg.Transport = net
			cfg.OnEpoch = func(e Epoch) {
				mu.Lock()
				got[name] = append(got[name], e)
				mu.Unlock()
			}
			n, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			net.nodes[name] = n
			nodes = append(nodes, n)
		}
		view := func() []Peer {
			var v []Peer
			for i, n := range nodes {
				a := n.Advert()
				v = append(v, Peer{Name: fmt.Sprintf("n%d", i+1), GRPCAddr: fmt.Sprintf("n%d:7946", i+1), RaftID: a.RaftID, Group: a.Group, Epoch: a.Epoch})
			}
			return v
		}
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Go(func() {
				if err := n.Run(ctx); err != nil {
					t.Errorf("Run: %v", err)
				}
			})
		}
		for range 100 { // gossip: a view every 100ms, for 10s
			for _, n := range nodes {
				n.SetView(view())
			}
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
		}
		mu.Lock()
		for _, n := range []string{"n1", "n2", "n3"} {
			var changes []Change
			for _, e := range got[n] {
				changes = append(changes, e.Change)
			}
			want := []Change{{Join, "n1"}, {Join, "n2"}, {Join, "n3"}}
			if !slices.Equal(changes, want) {
				t.Errorf("%s applied %v, want %v", n, changes, want)
			}
		}
		mu.Unlock()
		for i, n := range nodes {
			if st := n.Status(); len(st.Voters) != 3 {
				t.Errorf("n%d: voters %v, want 3", i+1, st.Voters)
			}
			if !n.LeaseUntil().After(time.Now()) {
				t.Errorf("n%d holds no lease", i+1)
			}
		}
		if err := nodes[0].Run(ctx); !errors.Is(err, ErrStopped) {
			t.Errorf("second Run = %v, want ErrStopped", err)
		}
		cancel()
		wg.Wait()
	})
}

func TestConfigErrorsNameTheField(t *testing.T) {
	ok := FastConfig("n1", "n1:7946")
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"Name", func(c *Config) { c.Name = "" }},
		{"GRPCAddr", func(c *Config) { c.GRPCAddr = "" }},
		{"TickInterval", func(c *Config) { c.TickInterval = -time.Second }},
		{"HeartbeatTicks", func(c *Config) { c.HeartbeatTicks = -1 }},
		{"ElectionTicks", func(c *Config) { c.ElectionTicks = 1 }},
		{"MaxVoters", func(c *Config) { c.MaxVoters = 4 }},
		{"LeaseDuration", func(c *Config) { c.LeaseDuration = time.Hour }},
		{"MaxClockDrift", func(c *Config) { c.MaxClockDrift = 1.5 }},
		{"BootstrapExpect", func(c *Config) { c.BootstrapExpect = -2 }},
		{"Inbox", func(c *Config) { c.Inbox = -1 }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			_, err := New(c)
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New = %v, want a *ConfigError for %s", err, tc.field)
			}
		})
	}
	if _, err := New(ok); err != nil {
		t.Fatalf("FastConfig: %v", err)
	}
	if _, err := New(LANConfig("n1", "n1:7946")); err != nil {
		t.Fatalf("LANConfig: %v", err)
	}
}

func TestDeadWait(t *testing.T) {
	c := LANConfig("n1", "n1:7946")
	c.MaxClockDrift = 0.5
	if got, want := c.DeadWait(), 2700*time.Millisecond; got != want { // (0.5s + 1.3s) × 1.5
		t.Fatalf("DeadWait = %v, want %v", got, want)
	}
}
