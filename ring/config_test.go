package ring

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestDefaultConfig(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.PartitionCount != 16381 || cfg.ReplicationFactor != 500 || cfg.Load != 1.01 {
		t.Fatalf("DefaultConfig() = %+v", cfg)
	}
	if err := cfg.validate(); err != nil {
		t.Fatalf("DefaultConfig().validate() = %v", err)
	}
	// Zero fields mean the defaults: the same ring.
	a := mustNew(t, Config{}, sluices(3))
	b := mustNew(t, cfg, sluices(3))
	if a.PartitionCount() != DefaultPartitionCount || len(Moved(a, b)) != 0 {
		t.Fatalf("New(Config{}) differs from New(DefaultConfig())")
	}
}

func TestConfigValidation(t *testing.T) {
	// The largest values pass validate (building such a ring takes a while).
	if err := (Config{PartitionCount: MaxPartitionCount, ReplicationFactor: MaxReplicationFactor, Load: 1e9}).validate(); err != nil {
		t.Errorf("the largest config: %v", err)
	}
	for _, tc := range []struct {
		name    string
		cfg     Config
		members int
		field   string // "" = valid
	}{
		{"defaults", Config{}, 3, ""},
		{"one partition", Config{PartitionCount: 1, ReplicationFactor: 2, Load: 1.5}, 1, ""},
		{"negative partitions", Config{PartitionCount: -1}, 3, "PartitionCount"},
		{"too many partitions", Config{PartitionCount: MaxPartitionCount + 1}, 3, "PartitionCount"},
		{"fewer partitions than members", Config{PartitionCount: 3}, 4, "PartitionCount"},
		{"one virtual node", Config{ReplicationFactor: 1}, 3, "ReplicationFactor"},
		{"negative virtual nodes", Config{ReplicationFactor: -5}, 3, "ReplicationFactor"},
		{"too many virtual nodes", Config{ReplicationFactor: MaxReplicationFactor + 1}, 3, "ReplicationFactor"},
		{"load 1", Config{Load: 1}, 3, "Load"},
		{"load below 1", Config{Load: 0.5}, 3, "Load"},
		{"negative load", Config{Load: -1.2}, 3, "Load"},
		{"NaN load", Config{Load: math.NaN()}, 3, "Load"},
		{"infinite load", Config{Load: math.Inf(1)}, 3, "Load"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(tc.cfg, sluices(tc.members))
			if tc.field == "" {
				if err != nil || r == nil || r.Len() != tc.members {
					t.Fatalf("New(%+v) = %v, %v; want a ring of %d", tc.cfg, r, err, tc.members)
				}
				return
			}
			if err == nil || r != nil {
				t.Fatalf("New(%+v) = %v, %v; want an error", tc.cfg, r, err)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %q does not wrap ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name the field %s", err, tc.field)
			}
		})
	}
}
