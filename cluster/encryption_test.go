package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
)

// keyFile writes keys (base64, the primary first) to a new key file.
func keyFile(t *testing.T, keys ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gossip.keys")
	writeFile(t, path, strings.Join(keys, "\n")+"\n")
	return path
}

// encrypted is localConfig with a gossip key file.
func encrypted(name, keyFile string, join ...string) cluster.Config {
	cfg := localConfig(name, join...)
	cfg.GossipKeyFile = keyFile
	return cfg
}

// memberCount is the number of members n's snapshot lists.
func memberCount(n *testNode) int { return len(n.Snapshot().Members) }

// refusedJoin starts a node from cfg that joins the seeds, waits until it
// has failed to join three times, and checks that it stayed alone and
// that the cluster did not grow.
func refusedJoin(t *testing.T, cfg cluster.Config, cluster []*testNode) {
	t.Helper()
	n := startNode(t, cfg)
	waitFor(t, 10*time.Second, cfg.NodeName+" fails to join three times", func() bool {
		return n.logs.count("cluster: join attempt failed") >= 3
	})
	if n.Joined() || memberCount(n) != 1 {
		t.Fatalf("%s joined (Joined %v, %d members)", cfg.NodeName, n.Joined(), memberCount(n))
	}
	for _, m := range cluster {
		if got := memberCount(m); got != len(cluster) {
			t.Fatalf("%s lists %d members after %s tried to join, want %d", m.LocalName(), got, cfg.NodeName, len(cluster))
		}
	}
	n.stop()
}

func TestEncryptedJoin(t *testing.T) {
	k1, k2 := newKey(t, 32), newKey(t, 16)
	a := startNode(t, encrypted("a", keyFile(t, k1)))
	b := startNode(t, encrypted("b", keyFile(t, k1), a.GossipAddr()))
	pair := []*testNode{a, b}
	waitFor(t, 10*time.Second, "a and b, with the same key, join", func() bool { return converged(pair, pair, nil) })
	if s := a.GossipKeyStatus(); !s.Enabled || s.Primary != fingerprint(t, k1) || len(s.Keys) != 1 {
		t.Fatalf("a's keyring = %+v, want only %s", s, fingerprint(t, k1))
	}

	t.Run("another key", func(t *testing.T) {
		refusedJoin(t, encrypted("wrong-key", keyFile(t, k2), b.GossipAddr()), pair)
	})
	t.Run("no key", func(t *testing.T) {
		refusedJoin(t, localConfig("plain", a.GossipAddr()), pair)
	})
	t.Run("a key, into a clear-text cluster", func(t *testing.T) {
		plain := startNode(t, localConfig("plain-seed"))
		refusedJoin(t, encrypted("keyed", keyFile(t, k1), plain.GossipAddr()), []*testNode{plain})
	})
}

// kubeSecretDir lays a key file out as a Kubernetes Secret volume does:
// dir/gossip.keys -> ..data/gossip.keys, ..data -> ..<version>. It
// returns the key file's path and a function that swaps in new contents
// the way the kubelet does (a new version directory, then ..data renamed
// over).
func kubeSecretDir(t *testing.T, contents string) (string, func(string)) {
	t.Helper()
	dir := t.TempDir()
	version := 0
	swap := func(contents string) {
		version++
		v := fmt.Sprintf("..2026_12_04_%02d", version)
		if err := os.Mkdir(filepath.Join(dir, v), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, v, "gossip.keys"), []byte(contents), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(v, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	swap(contents)
	if err := os.Symlink(filepath.Join("..data", "gossip.keys"), filepath.Join(dir, "gossip.keys")); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "gossip.keys"), swap
}

func TestKeyRotation(t *testing.T) {
	k1, k2 := newKey(t, 32), newKey(t, 32)
	fp1, fp2 := fingerprint(t, k1), fingerprint(t, k2)

	// node-0's key file is a Kubernetes Secret volume; the others' files
	// are replaced by a rename.
	kubePath, kubeSwap := kubeSecretDir(t, k1+"\n")
	paths := []string{kubePath, keyFile(t, k1), keyFile(t, k1)}
	write := func(i int, keys ...string) {
		contents := strings.Join(keys, "\n") + "\n"
		if i == 0 {
			kubeSwap(contents)
			return
		}
		writeFile(t, paths[i], contents)
	}
	var nodes []*testNode
	meta := map[string]cluster.NodeMeta{}
	for i, p := range paths {
		var join []string
		if i > 0 {
			join = []string{nodes[0].GossipAddr()}
		}
		cfg := encrypted(fmt.Sprintf("node-%d", i), p, join...)
		meta[cfg.NodeName] = cfg.Meta
		nodes = append(nodes, startNode(t, cfg))
	}
	waitFor(t, 10*time.Second, "3 nodes with key 1 join", func() bool { return converged(nodes, nodes, meta) })
	waitFor(t, 2*time.Second, "every OnChange lists the 3 (after Config.Settle)", func() bool {
		for _, n := range nodes {
			if got := n.received(); len(got) == 0 || len(got[len(got)-1].Members) != 3 {
				return false
			}
		}
		return true
	})
	since := make([]int, len(nodes)) // each node's snapshots from here on must list all 3
	for i, n := range nodes {
		since[i] = len(n.received()) - 1
	}

	round := 0
	step := func(what string, primary string, keys ...string) {
		t.Helper()
		for i := range nodes {
			write(i, keys...)
		}
		var want []string
		for _, k := range keys {
			want = append(want, fingerprint(t, k))
		}
		waitFor(t, 10*time.Second, what+": every node reloads its keyring", func() bool {
			for _, n := range nodes {
				if s := n.GossipKeyStatus(); s.Primary != primary || !slices.Equal(s.Keys, want) {
					return false
				}
			}
			return true
		})
		// Gossip still flows both ways under the new keyring: each node's
		// new metadata reaches every other node.
		round++
		for _, n := range nodes {
			m := cluster.NodeMeta{Version: fmt.Sprintf("%s-r%d", n.LocalName(), round)}
			meta[n.LocalName()] = m
			if err := n.UpdateMeta(m, 5*time.Second); err != nil {
				t.Fatalf("%s: UpdateMeta: %v", what, err)
			}
		}
		waitFor(t, 10*time.Second, what+": every node sees the others' new metadata", func() bool {
			return converged(nodes, nodes, meta)
		})
	}
	step("1. add key 2 as secondary", fp1, k1, k2)
	step("2. make key 2 primary", fp2, k2, k1)
	step("3. remove key 1", fp2, k2)

	for i, n := range nodes {
		for _, s := range n.received()[since[i]:] {
			if len(s.Members) != 3 {
				t.Fatalf("%s's snapshot %d listed %d members during the rotation, want 3", n.LocalName(), s.Version, len(s.Members))
			}
		}
		if s := n.GossipKeyStatus(); s.Reloads != 3 || s.Rejected != 0 {
			t.Fatalf("%s: %d reloads, %d rejected, want 3 and 0", n.LocalName(), s.Reloads, s.Rejected)
		}
	}
	// Key 1 no longer opens the cluster; key 2 does.
	refusedJoin(t, encrypted("old-key", keyFile(t, k1), nodes[1].GossipAddr()), nodes)
	late := startNode(t, encrypted("new-key", keyFile(t, k2), nodes[2].GossipAddr()))
	all := append(slices.Clone(nodes), late)
	waitFor(t, 10*time.Second, "a node with key 2 joins", func() bool {
		for _, n := range all {
			if memberCount(n) != 4 {
				return false
			}
		}
		return true
	})
}

func TestBadKeyFileKeepsKeyring(t *testing.T) {
	k1 := newKey(t, 24)
	path := keyFile(t, k1)
	a := startNode(t, encrypted("a", path))
	writeFile(t, path, k1+"\nnot a key\n")
	waitFor(t, 10*time.Second, "the watch rejects the bad file", func() bool { return a.GossipKeyStatus().Rejected >= 1 })
	if s := a.GossipKeyStatus(); s.Primary != fingerprint(t, k1) || len(s.Keys) != 1 || s.Reloads != 0 {
		t.Fatalf("keyring after a bad file = %+v, want key 1 alone and no reload", s)
	}
	if a.logs.count("cluster: gossip key file rejected; keeping the keyring in force") == 0 {
		t.Fatal("the rejection was not logged")
	}
	// SIGHUP's path: the same error, naming the file and line.
	before := a.GossipKeyStatus().Rejected
	err := a.ReloadGossipKeys()
	if err == nil || !strings.Contains(err.Error(), path+" line 2: not standard base64") {
		t.Fatalf("ReloadGossipKeys = %v, want an error naming %s line 2", err, path)
	}
	if got := a.GossipKeyStatus().Rejected; got != before+1 {
		t.Fatalf("Rejected = %d, want %d", got, before+1)
	}
	// The old keyring still works: a node with key 1 joins.
	b := startNode(t, encrypted("b", keyFile(t, k1), a.GossipAddr()))
	pair := []*testNode{a, b}
	waitFor(t, 10*time.Second, "a node with key 1 joins", func() bool { return converged(pair, pair, nil) })
	// Removing the file is rejected too, and changes nothing.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := a.ReloadGossipKeys(); err == nil {
		t.Fatal("ReloadGossipKeys accepted a missing file")
	}
	if s := a.GossipKeyStatus(); len(s.Keys) != 1 {
		t.Fatalf("keyring after the file was removed = %+v", s)
	}
}
