package cluster_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
)

func TestConfigValidation(t *testing.T) {
	long := strings.Repeat("x", 600)
	tests := []struct {
		name   string
		change func(*cluster.Config)
		fields []string // every field named by the error
	}{
		{"no name", func(c *cluster.Config) { c.NodeName = "" }, []string{"NodeName"}},
		{"no bind", func(c *cluster.Config) { c.BindAddr = "" }, []string{"BindAddr"}},
		{"bind without port", func(c *cluster.Config) { c.BindAddr = "127.0.0.1" }, []string{"BindAddr"}},
		{"bind to a name", func(c *cluster.Config) { c.BindAddr = "localhost:0" }, []string{"BindAddr"}},
		{"bind port too big", func(c *cluster.Config) { c.BindAddr = "127.0.0.1:70000" }, []string{"BindAddr"}},
		{"advertise a name", func(c *cluster.Config) { c.AdvertiseAddr = "pod-0:7946" }, []string{"AdvertiseAddr"}},
		{"advertise 0.0.0.0", func(c *cluster.Config) { c.AdvertiseAddr = "0.0.0.0:7946" }, []string{"AdvertiseAddr"}},
		{"advertise a port with bind port 0", func(c *cluster.Config) { c.AdvertiseAddr = "10.0.0.1:7946" }, []string{"AdvertiseAddr"}},
		{"seed without port", func(c *cluster.Config) { c.Join = []string{"127.0.0.1:1", "sluice-headless"} }, []string{"Join[1]"}},
		{"seed port 0", func(c *cluster.Config) { c.Join = []string{"sluice:0"} }, []string{"Join[0]"}},
		{"seed without host", func(c *cluster.Config) { c.Join = []string{":7946"} }, []string{"Join[0]"}},
		{"negative retry", func(c *cluster.Config) { c.JoinRetry = -time.Second }, []string{"JoinRetry"}},
		{"grpc without port", func(c *cluster.Config) { c.Meta.GRPCAddr = "localhost" }, []string{"Meta.GRPCAddr"}},
		{"peer without port", func(c *cluster.Config) { c.Meta.PeerAddr = "localhost" }, []string{"Meta.PeerAddr"}},
		{"meta too long", func(c *cluster.Config) { c.Meta.Version = long }, []string{"Meta"}},
		{"unknown preset", func(c *cluster.Config) { c.Preset = "wan" }, []string{"Preset"}},
		{"several", func(c *cluster.Config) { c.NodeName = ""; c.Preset = "wan"; c.Join = []string{"x"} }, []string{"NodeName", "Preset", "Join[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cluster.LocalConfig("n")
			tt.change(&cfg)
			c, err := cluster.New(cfg)
			if err == nil {
				_ = c.Shutdown()
				t.Fatal("New succeeded")
			}
			if !errors.Is(err, cluster.ErrInvalidConfig) {
				t.Errorf("error %v does not wrap cluster.ErrInvalidConfig", err)
			}
			for _, f := range tt.fields {
				if !strings.Contains(err.Error(), "cluster: invalid config: "+f+": ") {
					t.Errorf("error %q does not name %s", err, f)
				}
			}
			var ce *cluster.ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.fields[0] {
				t.Errorf("error %v: first ConfigError is %+v, want field %s", err, ce, tt.fields[0])
			}
		})
	}
}

func TestConfigAccepts(t *testing.T) {
	for name, change := range map[string]func(*cluster.Config){
		"defaults for zero fields": func(c *cluster.Config) { c.JoinRetry, c.Rejoin, c.Preset = 0, 0, "" },
		"rejoin disabled":          func(c *cluster.Config) { c.Rejoin = -1 },
		"advertise with port 0":    func(c *cluster.Config) { c.AdvertiseAddr = "127.0.0.1:0" },
		"seeds by name and IPv6":   func(c *cluster.Config) { c.Join = []string{"sluice-0.sluice:7946", "[::1]:7946"} },
		"meta":                     func(c *cluster.Config) { c.Meta = cluster.NodeMeta{GRPCAddr: "sluice-0:9090", Version: "v1.2.3"} },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := cluster.LocalConfig("n")
			change(&cfg)
			c, err := cluster.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Shutdown(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPresets(t *testing.T) {
	lan := cluster.LANConfig("a")
	if lan.BindAddr != "0.0.0.0:7946" || lan.Preset != cluster.PresetLAN || lan.JoinRetry != time.Second {
		t.Fatalf("LANConfig = %+v", lan)
	}
	local := cluster.LocalConfig("a")
	if local.BindAddr != "127.0.0.1:0" || local.Preset != cluster.PresetLocal {
		t.Fatalf("LocalConfig = %+v", local)
	}
}
