package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluice-rl/sluice/internal/version"
	"github.com/sluice-rl/sluice/node"
)

// runServe parses the serve flags and runs a node until SIGTERM or SIGINT.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := node.DefaultConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var join listFlag
	var logFormat, logLevel, cpuProfile string
	fs.StringVar(&cfg.NodeName, "node-name", cfg.NodeName, "this node's name, unique in the cluster")
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", cfg.GRPCAddr, "gRPC listen address")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "HTTP listen address")
	fs.StringVar(&cfg.GossipAddr, "gossip-addr", cfg.GossipAddr, "gossip (memberlist) listen address")
	fs.StringVar(&cfg.GRPCAdvertiseAddr, "grpc-advertise-addr", "", "gRPC address other nodes reach this one at (default: the listener's, with the gossip host)")
	fs.StringVar(&cfg.GossipAdvertiseAddr, "gossip-advertise-addr", "", "gossip address other nodes reach this one at (default: derived from --gossip-addr)")
	fs.Var(&join, "join", "comma-separated host:port gossip seeds to join; a host may be a DNS name with several addresses")
	fs.DurationVar(&cfg.PeerTimeout, "peer-timeout", cfg.PeerTimeout, "deadline of each call to another node")
	fs.DurationVar(&cfg.BatchWindow, "batch-window", cfg.BatchWindow, "how long a forwarded check may wait to share an RPC to its owner (0: only while one is in flight)")
	fs.StringVar(&cfg.PolicyFile, "config", "", "YAML file of named policies (SIGHUP reloads it)")
	fs.StringVar(&cfg.RLSConfig, "rls-config", "", "envoyproxy/ratelimit configuration of the Envoy rate limit service (envoy.service.ratelimit.v3, on the gRPC port): a YAML file or a directory of them, one domain each; watched, and reloaded on SIGHUP (default: no domains, every descriptor OK)")
	fs.BoolVar(&cfg.RLSShadowMode, "rls-shadow-mode", false, "Envoy rate limit service in global shadow mode (envoyproxy/ratelimit's SHADOW_MODE): answer OK overall when over a limit, still counting and reporting it")
	fs.BoolVar(&cfg.RLSResponseHeaders, "rls-response-headers", false, "add the rate limit headers of the descriptor closest to its limit to Envoy rate limit service responses (LIMIT_RESPONSE_HEADERS_ENABLED)")
	fs.StringVar(&cfg.RLSLimitHeader, "rls-limit-header", cfg.RLSLimitHeader, "name of the header of the limit, with --rls-response-headers (LIMIT_LIMIT_HEADER)")
	fs.StringVar(&cfg.RLSRemainingHeader, "rls-remaining-header", cfg.RLSRemainingHeader, "name of the header of the remaining hits, with --rls-response-headers (LIMIT_REMAINING_HEADER)")
	fs.StringVar(&cfg.RLSResetHeader, "rls-reset-header", cfg.RLSResetHeader, "name of the header of the seconds until the window resets, with --rls-response-headers (LIMIT_RESET_HEADER)")
	fs.Float64Var(&cfg.RLSNearLimitRatio, "rls-near-limit-ratio", cfg.RLSNearLimitRatio, "share of a limit, in (0, 1], above which hits count as near_limit (NEAR_LIMIT_RATIO)")
	fs.Int64Var(&cfg.Store.MaxBytes, "store-max-bytes", cfg.Store.MaxBytes, "memory cap of stored limit state in bytes; new keys beyond it are refused (0: no cap)")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "how long to drain in-flight calls on SIGTERM")
	fs.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile (go tool pprof) of the whole run to this file")
	describeEnv(fs)
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	cfg.Join = join
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	hopts := &slog.HandlerOptions{Level: level}
	switch logFormat {
	case "text":
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, hopts))
	case "json":
		cfg.Logger = slog.New(slog.NewJSONHandler(stderr, hopts))
	default:
		return fmt.Errorf("--log-format: %q is not text or json", logFormat)
	}
	n, err := node.New(cfg)
	if err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	cfg.Logger.Info("starting sluice", "version", version.String(), "node", cfg.NodeName)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_ = n.Reload() // a bad file is logged and what is in force kept
			}
		}
	}()
	return n.Run(ctx)
}
