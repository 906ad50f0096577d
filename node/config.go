package node

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/sluice-rl/sluice/store"
)

// ErrInvalidConfig wraps every Config validation error.
var ErrInvalidConfig = errors.New("node: invalid config")

// Config configures a Node.
type Config struct {
	// NodeName identifies the node in results and, later, in the cluster.
	// Empty means the host name.
	NodeName string
	// GRPCAddr is the gRPC listen address (sluice.v1, health, reflection).
	GRPCAddr string
	// HTTPAddr is the HTTP listen address (/v1/check, /v1/usage, /healthz,
	// /readyz, /metrics).
	HTTPAddr string
	// GossipAddr is the memberlist bind address (used by the cluster).
	GossipAddr string
	// Join lists host:port seeds to join (used by the cluster).
	Join []string
	// PolicyFile is an optional YAML file of named policies; SIGHUP reloads it.
	PolicyFile string
	// Store configures the key store (shards, memory cap).
	Store store.Config
	// SweepInterval is how often expired states are dropped from the store.
	SweepInterval time.Duration
	// ShutdownTimeout bounds the drain of in-flight calls on shutdown.
	ShutdownTimeout time.Duration
	// Clock returns the current time; nil means time.Now. Tests inject a fake.
	Clock func() time.Time
	// Logger receives the node's logs; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultConfig is the configuration of `sluice serve` with no flags: a
// single node that is a whole cluster of one.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	if host == "" {
		host = "sluice"
	}
	return Config{
		NodeName:        host,
		GRPCAddr:        ":8081",
		HTTPAddr:        ":8080",
		GossipAddr:      ":7946",
		Store:           store.DefaultConfig(),
		SweepInterval:   10 * time.Second,
		ShutdownTimeout: 10 * time.Second,
	}
}

// LocalConfig is a preset for tests: every listener on 127.0.0.1:0 and a
// quiet logger.
func LocalConfig(name string) Config {
	c := DefaultConfig()
	c.NodeName = name
	c.GRPCAddr = "127.0.0.1:0"
	c.HTTPAddr = "127.0.0.1:0"
	c.GossipAddr = "127.0.0.1:0"
	c.ShutdownTimeout = 5 * time.Second
	c.Logger = slog.New(slog.DiscardHandler)
	return c
}

// validate checks the config; errors name the field.
func (c *Config) validate() error {
	switch {
	case c.NodeName == "":
		return fmt.Errorf("%w: NodeName: must not be empty", ErrInvalidConfig)
	case c.GRPCAddr == "":
		return fmt.Errorf("%w: GRPCAddr: must not be empty", ErrInvalidConfig)
	case c.HTTPAddr == "":
		return fmt.Errorf("%w: HTTPAddr: must not be empty", ErrInvalidConfig)
	case c.SweepInterval <= 0:
		return fmt.Errorf("%w: SweepInterval: must be > 0", ErrInvalidConfig)
	case c.ShutdownTimeout <= 0:
		return fmt.Errorf("%w: ShutdownTimeout: must be > 0", ErrInvalidConfig)
	}
	return nil
}
