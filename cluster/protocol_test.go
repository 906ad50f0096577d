package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
)

// protocolNode starts a node advertising peer protocol p, joining seeds.
func protocolConfig(name string, p int, join ...string) cluster.Config {
	cfg := localConfig(name, join...)
	cfg.Meta = cluster.NodeMeta{Version: "test", Protocol: p}
	return cfg
}

// TestProtocolWindow: members whose peer protocol versions differ by one
// run side by side; a node two versions from a member does not join (its
// Run returns ErrIncompatibleProtocol naming the member and both
// versions), and that member never lists it and logs the refusal.
func TestProtocolWindow(t *testing.T) {
	a := startNode(t, protocolConfig("a", 2))
	b := startNode(t, protocolConfig("b", 3, a.GossipAddr()))
	waitFor(t, 10*time.Second, "a (protocol 2) and b (protocol 3) list each other", func() bool {
		return converged([]*testNode{a, b}, []*testNode{a, b}, nil)
	})
	if m, _ := a.Snapshot().Member("b"); m.Name != "b" {
		t.Fatalf("a lists %+v", a.Snapshot().Members)
	}

	for _, seed := range []*testNode{a, b} {
		c := newNode(t, protocolConfig("c", 4, seed.GossipAddr()))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.Run(ctx)
		cancel()
		if !errors.Is(err, cluster.ErrIncompatibleProtocol) {
			t.Fatalf("c (protocol 4) joining through %s: Run = %v, want ErrIncompatibleProtocol", seed.LocalName(), err)
		}
		for _, want := range []string{`member "a" speaks peer protocol 2`, `this node ("c") 4`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("through %s: %q does not say %s", seed.LocalName(), err, want)
			}
		}
		t.Logf("through %s: %v", seed.LocalName(), err)
		if _, ok := a.Snapshot().Member("c"); ok {
			t.Errorf("through %s: a (protocol 2) lists c (protocol 4)", seed.LocalName())
		}
		_ = c.Shutdown()
	}
	// c's alive messages reached a (directly, or gossiped by b): refused.
	waitFor(t, 5*time.Second, "a logs the refusal", func() bool { return a.logs.count("cluster: member refused") > 0 })
	if _, ok := a.Snapshot().Member("c"); ok {
		t.Errorf("a (protocol 2) lists c (protocol 4)")
	}
}

func TestProtocolBadConfig(t *testing.T) {
	cfg := protocolConfig("a", -1)
	_, err := cluster.New(cfg)
	var ce *cluster.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Meta.Protocol" || !errors.Is(err, cluster.ErrInvalidConfig) {
		t.Fatalf("New with Meta.Protocol -1 = %v, want a ConfigError for Meta.Protocol", err)
	}
}
