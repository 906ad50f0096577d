package cluster_test

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
)

// A node alone (no cluster authentication, no Join list) refuses a join:
// the joiner stays alone, the node keeps itself only, and the refusal is
// logged and counted.
func TestAloneRefusesMembers(t *testing.T) {
	cfg := localConfig("alone")
	cfg.Alone = true
	a := startNode(t, cfg)
	refusedJoin(t, localConfig("intruder", a.GossipAddr()), []*testNode{a})
	if got := a.Refusals().Alone; got == 0 {
		t.Fatalf("Refusals().Alone = 0 after a refused join")
	}
	if a.logs.count("cluster: member refused: this node is a cluster of one without cluster authentication") == 0 {
		t.Fatal("the refusal was not logged")
	}
	if a.logs.count("cluster: member joined") != 0 {
		t.Fatal("a member joined the node alone")
	}
}

func TestAloneWithJoinIsInvalid(t *testing.T) {
	cfg := localConfig("alone", "127.0.0.1:1")
	cfg.Alone = true
	if _, err := cluster.New(cfg); err == nil {
		t.Fatal("New with Alone and Join: no error")
	}
}

// Members joining and leaving are logged (INFO, with name and address),
// and so are gossip messages refused for their key, which are counted.
func TestMembershipLogged(t *testing.T) {
	k1, k2 := newKey(t, 32), newKey(t, 32)
	a := startNode(t, encrypted("a", keyFile(t, k1)))
	b := startNode(t, encrypted("b", keyFile(t, k1), a.GossipAddr()))
	pair := []*testNode{a, b}
	waitFor(t, 10*time.Second, "a and b join", func() bool { return converged(pair, pair, nil) })
	if a.logs.count("cluster: member joined") == 0 {
		t.Fatal("a did not log b joining")
	}
	refusedJoin(t, encrypted("wrong-key", keyFile(t, k2), a.GossipAddr()), pair)
	waitFor(t, 5*time.Second, "a counts the wrong key's attempts", func() bool {
		return a.Refusals().Undecrypted > 0 &&
			a.logs.count("cluster: gossip refused: not encrypted with an accepted key") > 0
	})
	b.stop()
	waitFor(t, 10*time.Second, "a logs b leaving", func() bool { return a.logs.count("cluster: member left") > 0 })
}

// Keys given in the Config (derived from a cluster secret) rotate in
// place with SetGossipKeys: add the new key, make it the primary, drop
// the old one; a node with only the new key then joins.
func TestSetGossipKeys(t *testing.T) {
	raw := func(b64 string) []byte {
		k, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k1, k2 := raw(newKey(t, 32)), raw(newKey(t, 32))
	keyed := func(name string, keys [][]byte, join ...string) cluster.Config {
		cfg := localConfig(name, join...)
		cfg.GossipKeys = keys
		return cfg
	}
	a := startNode(t, keyed("a", [][]byte{k1}))
	b := startNode(t, keyed("b", [][]byte{k1}, a.GossipAddr()))
	pair := []*testNode{a, b}
	waitFor(t, 10*time.Second, "a and b join", func() bool { return converged(pair, pair, nil) })
	for _, step := range [][][]byte{{k1, k2}, {k2, k1}, {k2}} {
		for _, n := range pair {
			if err := n.SetGossipKeys(step); err != nil {
				t.Fatal(err)
			}
		}
	}
	if s := a.GossipKeyStatus(); len(s.Keys) != 1 || s.Reloads != 3 {
		t.Fatalf("a's keyring after the rotation: %+v", s)
	}
	c := startNode(t, keyed("c", [][]byte{k2}, a.GossipAddr()))
	all := []*testNode{a, b, c}
	waitFor(t, 10*time.Second, "c, with the new key only, joins", func() bool { return converged(all, all, nil) })
	if err := startNode(t, localConfig("plain")).SetGossipKeys([][]byte{k1}); err == nil {
		t.Fatal("SetGossipKeys on a cluster without encryption: no error")
	}
}
