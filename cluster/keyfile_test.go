package cluster_test

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/cluster"
)

// newKey returns a random base64 AES key of n bytes, as a key file holds it.
func newKey(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// fingerprint is the KeyFingerprint of a base64 key.
func fingerprint(t *testing.T, key string) string {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		t.Fatal(err)
	}
	return cluster.KeyFingerprint(b)
}

// writeFile writes contents to path atomically (a rename, as editors and
// configuration tools do).
func writeFile(t *testing.T, path, contents string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(contents), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestLoadGossipKeyFile(t *testing.T) {
	k16, k24, k32 := newKey(t, 16), newKey(t, 24), newKey(t, 32)
	path := filepath.Join(t.TempDir(), "gossip.keys")
	writeFile(t, path, "# the primary first\n\n  "+k32+"  \n"+k16+"\n# old\n"+k24+"\n")
	keys, err := cluster.LoadGossipKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range keys {
		got = append(got, base64.StdEncoding.EncodeToString(k))
	}
	if strings.Join(got, ",") != strings.Join([]string{k32, k16, k24}, ",") {
		t.Fatalf("keys = %v, want the primary %s then %s, %s", got, k32, k16, k24)
	}
}

func TestLoadGossipKeyFileBadInput(t *testing.T) {
	k := newKey(t, 32)
	var many strings.Builder
	for range cluster.MaxGossipKeys + 1 {
		many.WriteString(newKey(t, 16) + "\n")
	}
	tests := []struct {
		name, contents string
		want           string // in the error, after the path
	}{
		{"empty", "", ": no key"},
		{"comments only", "# nothing\n\n", ": no key"},
		{"not base64", k + "\nnot-base64!\n", " line 2: not standard base64"},
		{"raw base64 without padding", strings.TrimRight(newKey(t, 16), "="), " line 1: not standard base64"},
		{"20 bytes", "# c\n" + base64.StdEncoding.EncodeToString(make([]byte, 20)), " line 2: key is 20 bytes, want 16, 24 or 32"},
		{"hex of 32 bytes, not base64", strings.Repeat("ab", 32), " line 1: key is 48 bytes"},
		{"duplicate", k + "\n\n" + k + "\n", " line 3: the same key as line 1"},
		{"two keys on a line", k + " " + k, " line 1: not standard base64"},
		{"too many", many.String(), " line 17: more than 16 keys"},
		{"too large", strings.Repeat("#", cluster.MaxGossipKeyFileBytes+1), ": larger than 65536 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "gossip.keys")
			writeFile(t, path, tt.contents)
			_, err := cluster.LoadGossipKeyFile(path)
			if !errors.Is(err, cluster.ErrBadKeyFile) {
				t.Fatalf("err = %v, want ErrBadKeyFile", err)
			}
			if want := "cluster: gossip key file " + path + tt.want; !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("err = %q, want it to start with %q", err, want)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "absent")
		_, err := cluster.LoadGossipKeyFile(path)
		if !errors.Is(err, cluster.ErrBadKeyFile) || !errors.Is(err, os.ErrNotExist) && !strings.Contains(err.Error(), path) {
			t.Fatalf("err = %v, want ErrBadKeyFile naming %s", err, path)
		}
	})
}

func TestNewRejectsBadKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gossip.keys")
	writeFile(t, path, newKey(t, 16)+"\nAAAA\n")
	cfg := cluster.LocalConfig("n")
	cfg.GossipKeyFile = path
	c, err := cluster.New(cfg)
	if err == nil {
		_ = c.Shutdown()
		t.Fatal("New accepted a key file with a 3-byte key")
	}
	var ce *cluster.ConfigError
	if !errors.As(err, &ce) || ce.Field != "GossipKeyFile" || !strings.Contains(err.Error(), path+" line 2: key is 3 bytes") {
		t.Fatalf("err = %v, want a ConfigError for GossipKeyFile naming %s line 2", err, path)
	}
}
