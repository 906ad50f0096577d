package store

import (
	"errors"
	"strings"
	"testing"
)

func TestDefaultConfig(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.Shards != 4096 || cfg.MaxBytes != 0 {
		t.Fatalf("DefaultConfig() = %+v, want 4096 shards and no cap", cfg)
	}
	if err := cfg.validate(); err != nil {
		t.Fatalf("DefaultConfig().validate() = %v", err)
	}
	s, err := New(Config{}) // zero Shards means the default
	if err != nil {
		t.Fatal(err)
	}
	if len(s.shards) != DefaultShards {
		t.Fatalf("New(Config{}) has %d shards, want %d", len(s.shards), DefaultShards)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		field string // "" = valid
	}{
		{"one shard", Config{Shards: 1}, ""},
		{"max shards", Config{Shards: MaxShards}, ""},
		{"capped", Config{Shards: 64, MaxBytes: 1 << 30}, ""},
		{"negative shards", Config{Shards: -4}, "Shards"},
		{"not a power of two", Config{Shards: 3}, "Shards"},
		{"too many shards", Config{Shards: MaxShards * 2}, "Shards"},
		{"negative max bytes", Config{Shards: 16, MaxBytes: -1}, "MaxBytes"},
		{"negative max keys per client", Config{Shards: 16, MaxKeysPerClient: -1}, "MaxKeysPerClient"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.cfg)
			if tc.field == "" {
				if err != nil || s == nil {
					t.Fatalf("New(%+v) = %v, %v; want a store", tc.cfg, s, err)
				}
				if len(s.shards) != tc.cfg.Shards {
					t.Fatalf("got %d shards, want %d", len(s.shards), tc.cfg.Shards)
				}
				return
			}
			if err == nil || s != nil {
				t.Fatalf("New(%+v) = %v, %v; want an error", tc.cfg, s, err)
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
