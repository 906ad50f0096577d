package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/limiter"
)

// TestConfigRLSSettings: the RLS settings' bad values are errors naming
// the field; the defaults are the reference's.
func TestConfigRLSSettings(t *testing.T) {
	if c := DefaultConfig(); c.RLSLimitHeader != "RateLimit-Limit" || c.RLSRemainingHeader != "RateLimit-Remaining" ||
		c.RLSResetHeader != "RateLimit-Reset" || c.RLSNearLimitRatio != 0.8 || c.RLSShadowMode || c.RLSResponseHeaders {
		t.Errorf("defaults %+v, want the reference's", c)
	}
	for _, tt := range []struct {
		name  string
		set   func(*Config)
		field string // "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"ratio 1", func(c *Config) { c.RLSNearLimitRatio = 1 }, ""},
		{"ratio 0", func(c *Config) { c.RLSNearLimitRatio = 0 }, "RLSNearLimitRatio"},
		{"ratio negative", func(c *Config) { c.RLSNearLimitRatio = -0.1 }, "RLSNearLimitRatio"},
		{"ratio above 1", func(c *Config) { c.RLSNearLimitRatio = 1.01 }, "RLSNearLimitRatio"},
		{"headers off: names unchecked", func(c *Config) { c.RLSLimitHeader = "" }, ""},
		{"custom names", func(c *Config) { c.RLSResponseHeaders, c.RLSLimitHeader = true, "X-RateLimit-Limit" }, ""},
		{"empty limit header", func(c *Config) { c.RLSResponseHeaders, c.RLSLimitHeader = true, "" }, "RLSLimitHeader"},
		{"remaining header with a colon", func(c *Config) { c.RLSResponseHeaders, c.RLSRemainingHeader = true, "X:Left" }, "RLSRemainingHeader"},
		{"reset header with a space", func(c *Config) { c.RLSResponseHeaders, c.RLSResetHeader = true, "X Reset" }, "RLSResetHeader"},
		{"ui keys never", func(c *Config) { c.UIKeys = "never" }, ""},
		{"ui keys unknown", func(c *Config) { c.UIKeys = "yes" }, "UIKeys"},
	} {
		c := LocalConfig("n")
		tt.set(&c)
		err := c.validate()
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.field != "" && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.field+":")):
			t.Errorf("%s: %v, want ErrInvalidConfig naming %s", tt.name, err, tt.field)
		}
	}
}

// Replicas is ReplicasAuto (the default), 0 (off) or 1 to
// limiter.MaxReplicas; anything else is refused naming the field.
func TestConfigReplicas(t *testing.T) {
	if got := DefaultConfig().Replicas; got != ReplicasAuto {
		t.Errorf("DefaultConfig().Replicas = %d, want ReplicasAuto", got)
	}
	for _, tc := range []struct {
		replicas int
		ok       bool
	}{{ReplicasAuto, true}, {0, true}, {1, true}, {limiter.MaxReplicas, true}, {limiter.MaxReplicas + 1, false}, {-2, false}} {
		c := DefaultConfig()
		c.Replicas = tc.replicas
		err := c.validate()
		if tc.ok != (err == nil) || (err != nil && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Replicas:"))) {
			t.Errorf("Replicas %d: err = %v, want ok %v (else ErrInvalidConfig naming Replicas)", tc.replicas, err, tc.ok)
		}
	}
	for r, want := range map[int]int{ReplicasAuto: 0, 0: -1, 2: 2} {
		if got := limiterReplicas(r); got != want {
			t.Errorf("limiterReplicas(%d) = %d, want %d", r, got, want)
		}
	}
}
