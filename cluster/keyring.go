package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/hashicorp/memberlist"
)

// DefaultKeyDebounce is how long the watch of Config.GossipKeyFile waits
// after the last change it saw before it re-reads the file: a burst of
// changes (an editor's save, a Kubernetes Secret's "..data" swap) reloads
// once.
const DefaultKeyDebounce = 100 * time.Millisecond

// GossipKeyStatus describes this node's gossip keyring (see
// Cluster.GossipKeyStatus). It names keys by KeyFingerprint only.
type GossipKeyStatus struct {
	// Enabled reports whether gossip is encrypted (Config.GossipKeyFile
	// or Config.GossipKeys was set).
	Enabled bool
	// Primary is the fingerprint of the key that encrypts what this node
	// sends.
	Primary string
	// Keys are the fingerprints of every installed key, the primary first.
	Keys []string
	// Reloads counts the re-reads of the file that changed the keyring.
	Reloads uint64
	// Rejected counts the re-reads that failed (a bad or missing file):
	// the keyring in force was kept.
	Rejected uint64
}

// keys holds a Cluster's gossip keyring and its reload state.
type keys struct {
	path     string              // Config.GossipKeyFile; "" means no encryption
	ring     *memberlist.Keyring // nil without encryption
	mu       sync.Mutex          // serializes reloads
	reloads  atomic.Uint64
	rejected atomic.Uint64
}

// newKeys loads path (a gossip key file, or "" for no encryption) into a
// memberlist keyring, or, without a path, installs given (Config.GossipKeys).
func newKeys(path string, given [][]byte) (*keys, error) {
	k := &keys{path: path}
	if path == "" && len(given) > 0 {
		var err error
		if k.ring, err = memberlist.NewKeyring(given[1:], given[0]); err != nil {
			return nil, &ConfigError{Field: "GossipKeys", Reason: err.Error()}
		}
		return k, nil
	}
	if path == "" {
		return k, nil
	}
	loaded, err := LoadGossipKeyFile(path)
	if err != nil {
		var kfe *KeyFileError
		if errors.As(err, &kfe) {
			return nil, &ConfigError{Field: "GossipKeyFile", Reason: kfe.detail()}
		}
		return nil, &ConfigError{Field: "GossipKeyFile", Reason: err.Error()}
	}
	if k.ring, err = memberlist.NewKeyring(loaded[1:], loaded[0]); err != nil { // sizes checked by the load
		return nil, &ConfigError{Field: "GossipKeyFile", Reason: err.Error()}
	}
	return k, nil
}

// configure makes memberlist encrypt with the keyring and refuse
// unencrypted messages both ways.
func (k *keys) configure(mc *memberlist.Config) {
	if k.ring == nil {
		return
	}
	mc.Keyring = k.ring
	mc.GossipVerifyIncoming = true
	mc.GossipVerifyOutgoing = true
}

// fingerprints returns the fingerprints of the installed keys.
func (k *keys) fingerprints() []string {
	if k.ring == nil {
		return nil
	}
	var out []string
	for _, key := range k.ring.GetKeys() {
		out = append(out, KeyFingerprint(key))
	}
	return out
}

// GossipKeyStatus returns the state of this node's gossip keyring.
func (c *Cluster) GossipKeyStatus() GossipKeyStatus {
	k := c.keys
	// memberlist's RemoveKey shifts keys inside the slice GetKeys returned
	// earlier: read it only between reloads.
	k.mu.Lock()
	defer k.mu.Unlock()
	s := GossipKeyStatus{Enabled: k.ring != nil, Reloads: k.reloads.Load(), Rejected: k.rejected.Load()}
	if s.Keys = k.fingerprints(); len(s.Keys) > 0 {
		s.Primary = s.Keys[0]
	}
	return s
}

// ReloadGossipKeys re-reads Config.GossipKeyFile and updates the keyring
// in place: it adds the keys that are new, makes the file's first key the
// primary, and removes the keys the file no longer lists, in that order,
// so this node never stops decrypting a key it still accepts. A file that
// cannot be used (a *KeyFileError naming the file and line) keeps the
// keyring in force; it is logged and counted in GossipKeyStatus.Rejected.
// An unchanged file changes nothing. Without a key file it does nothing
// and returns nil: encryption cannot be turned on or off without a
// restart.
//
// Run calls it when the file changes; the node also calls it on SIGHUP.
func (c *Cluster) ReloadGossipKeys() error {
	k := c.keys
	if k.ring == nil || k.path == "" {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	loaded, err := LoadGossipKeyFile(k.path)
	if err != nil {
		k.rejected.Add(1)
		c.log.Error("cluster: gossip key file rejected; keeping the keyring in force",
			"file", k.path, "err", err, "keys", k.fingerprints())
		return err
	}
	return c.installKeys(loaded, k.path)
}

// SetGossipKeys installs keys, the primary first, in the keyring in
// place, as ReloadGossipKeys does with a file's: the new keys are added,
// the first made the primary, the others removed. It is how a node
// started with Config.GossipKeys rotates them (keys derived from a
// cluster secret). Keys must be 16, 24 or 32 bytes. It returns an error
// wrapping ErrInvalidConfig for a Cluster started without GossipKeys, and
// changes nothing for a Cluster with a GossipKeyFile.
func (c *Cluster) SetGossipKeys(keys [][]byte) error {
	k := c.keys
	if k.ring == nil || k.path != "" {
		return &ConfigError{Field: "GossipKeys", Reason: "the cluster was started without GossipKeys: encryption cannot be turned on without a restart"}
	}
	if len(keys) == 0 {
		return &ConfigError{Field: "GossipKeys", Reason: "no key"}
	}
	for i, key := range keys {
		if n := len(key); n != 16 && n != 24 && n != 32 {
			return &ConfigError{Field: fmt.Sprintf("GossipKeys[%d]", i), Reason: fmt.Sprintf("key is %d bytes, want 16, 24 or 32", n)}
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return c.installKeys(keys, "cluster secret")
}

// installKeys updates the keyring in place to loaded, from source (a
// file or "cluster secret"), under k.mu.
func (c *Cluster) installKeys(loaded [][]byte, source string) error {
	k := c.keys
	installed := slices.Clone(k.ring.GetKeys())
	if bytes.Equal(installed[0], loaded[0]) && len(installed) == len(loaded) &&
		!slices.ContainsFunc(loaded, func(key []byte) bool { return !containsKey(installed, key) }) {
		c.log.Debug("cluster: gossip keys unchanged", "from", source)
		return nil
	}
	for _, key := range loaded {
		if err := k.ring.AddKey(key); err != nil { // sizes checked by the load
			return fmt.Errorf("cluster: gossip keys from %s: %w", source, err)
		}
	}
	if err := k.ring.UseKey(loaded[0]); err != nil { // added above
		return fmt.Errorf("cluster: gossip keys from %s: %w", source, err)
	}
	// UseKey installed a fresh slice: RemoveKey, which shifts keys in place,
	// no longer touches the one memberlist's readers held before.
	for _, key := range installed {
		if !containsKey(loaded, key) {
			if err := k.ring.RemoveKey(key); err != nil { // not the primary: that is loaded[0]
				return fmt.Errorf("cluster: gossip keys from %s: %w", source, err)
			}
		}
	}
	k.reloads.Add(1)
	fps := k.fingerprints()
	c.log.Info("cluster: gossip keyring reloaded", "from", source, "primary", fps[0], "keys", fps)
	return nil
}

// containsKey reports whether keys holds key.
func containsKey(keys [][]byte, key []byte) bool {
	return slices.ContainsFunc(keys, func(k []byte) bool { return bytes.Equal(k, key) })
}

// watchKeys re-reads Config.GossipKeyFile shortly after its directory
// changes, until ctx is done. It watches the directory, not the file, so
// that an atomic rename, a symlink swap and a Kubernetes Secret's "..data"
// swap are all seen. If the file system cannot be watched it logs why and
// waits for ctx (SIGHUP still reloads).
func (c *Cluster) watchKeys(ctx context.Context) {
	path := c.keys.path
	w, err := fsnotify.NewWatcher()
	if err != nil {
		c.log.Error("cluster: cannot watch the gossip key file; it reloads on SIGHUP only", "file", path, "err", err)
		<-ctx.Done()
		return
	}
	defer w.Close()
	dir := filepath.Dir(filepath.Clean(path))
	if err := w.Add(dir); err != nil {
		c.log.Error("cluster: cannot watch the gossip key file; it reloads on SIGHUP only", "dir", dir, "err", err)
	}
	// A change between New's load and the watch is seen now.
	_ = c.ReloadGossipKeys()
	debounce := c.cfg.KeyDebounce
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.done:
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			c.log.Debug("cluster: gossip key file directory changed", "event", ev.String())
			timer.Reset(debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			c.log.Warn("cluster: watching the gossip key file", "file", path, "err", err)
		case <-timer.C:
			_ = c.ReloadGossipKeys() // logged and counted
		}
	}
}
