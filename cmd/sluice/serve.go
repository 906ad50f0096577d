package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluice-rl/sluice/internal/version"
	"github.com/sluice-rl/sluice/node"
	"github.com/sluice-rl/sluice/policy"
)

// runServe parses the serve flags and runs a node until SIGTERM or SIGINT.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := node.DefaultConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var join listFlag
	var logFormat, logLevel, cpuProfile string
	var tracing bool
	fs.StringVar(&cfg.NodeName, "node-name", cfg.NodeName, "this node's name, unique in the cluster")
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", cfg.GRPCAddr, "gRPC listen address")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "HTTP listen address")
	fs.StringVar(&cfg.PeerAddr, "peer-addr", cfg.PeerAddr, "listen address of the peer service (sluice.v1.Peer), which only other nodes call")
	fs.StringVar(&cfg.PeerAdvertiseAddr, "peer-advertise-addr", "", "peer address other nodes reach this one at (default: the listener's, with the gossip host)")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert-file", "", "PEM certificate chain of the public gRPC and HTTP listeners: set (with --tls-key-file), both speak TLS only (1.2 at least); re-read when it changes")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&cfg.TLSClientCAFile, "tls-client-ca-file", "", "PEM CA bundle of the public listeners' clients: set, a client certificate it verifies is required (mTLS): at the handshake on gRPC; on HTTP on every path but the probes /healthz and /readyz (401 without one)")
	fs.StringVar(&cfg.PeerTLSCertFile, "peer-tls-cert-file", "", "PEM peer certificate, served on --peer-addr and presented to other nodes; must carry --peer-tls-name as a DNS SAN (default: --tls-cert-file); set, peer mTLS is on")
	fs.StringVar(&cfg.PeerTLSKeyFile, "peer-tls-key-file", "", "PEM private key of the peer certificate (default: --tls-key-file)")
	fs.StringVar(&cfg.PeerTLSCAFile, "peer-tls-ca-file", "", "PEM bundle of the peer CA, which verifies the other nodes (default: --tls-client-ca-file)")
	fs.StringVar(&cfg.PeerTLSName, "peer-tls-name", cfg.PeerTLSName, "DNS SAN that makes a certificate a peer's; the name expected of a peer's server certificate")
	fs.StringVar(&cfg.GossipAddr, "gossip-addr", cfg.GossipAddr, "gossip (memberlist) listen address")
	fs.StringVar(&cfg.GRPCAdvertiseAddr, "grpc-advertise-addr", "", "public gRPC address of this node, that clients learn from the Membership API (default: the listener's, with the gossip host)")
	fs.StringVar(&cfg.GossipAdvertiseAddr, "gossip-advertise-addr", "", "gossip address other nodes reach this one at (default: derived from --gossip-addr)")
	fs.StringVar(&cfg.GossipKeyFile, "gossip-key-file", "", "encrypt gossip with the keys in this file: one base64 AES key (16, 24 or 32 bytes) per line, the first encrypts, all decrypt; watched and reloaded on SIGHUP, so keys rotate without a restart (default: gossip in clear text)")
	fs.StringVar(&cfg.ClusterSecretFile, "cluster-secret-file", "", "authenticate the cluster with the shared secret in this file, the same on every node: one secret per line, standard base64 of 32 to 64 random bytes (openssl rand -base64 32), the first presented, all accepted; gossip keys and the peer port's TLS identity derive from it; watched and reloaded on SIGHUP, so a secret rotates without a restart (add the new line second, then move it first, then drop the old). Without it, peer mTLS or --insecure, --join is refused and a node alone keeps its peer and gossip ports on 127.0.0.1")
	fs.BoolVar(&cfg.Insecure, "insecure", false, "run the cluster without authentication: anyone who reaches the peer and gossip ports can join, read and change counters; logged as a WARN at every start, shown on /ui and by sluice members, and sluice_insecure 1")
	var adminNames listFlag
	fs.Var(&adminNames, "admin-names", "comma-separated client certificate names (subject CN, or a DNS, URI or e-mail SAN of a certificate --tls-client-ca-file verifies) allowed the admin calls: inspect and reset a key (sluice inspect, sluice reset)")
	fs.StringVar(&cfg.AdminTokenFile, "admin-token-file", "", "file of admin bearer tokens, one a line, standard base64 of at least 16 random bytes (openssl rand -base64 32), allowed the admin calls as \"authorization: Bearer TOKEN\"; re-read when it changes (without it and --admin-names, admin calls are refused)")
	fs.Var(&join, "join", "comma-separated host:port gossip seeds to join; a host may be a DNS name with several addresses")
	fs.IntVar(&cfg.BootstrapExpect, "bootstrap-expect", 0, "how many nodes, this one included, must see each other, none yet in the Raft group of the ring's epochs, before the lowest-named founds it; 0: 1 without --join (a group of one at once), else the number of --join entries and at least 2 (the usual list names every node); with one DNS seed, give the initial node count")
	fs.DurationVar(&cfg.PeerTimeout, "peer-timeout", cfg.PeerTimeout, "deadline of each call to another node")
	fs.Var(replicasFlag{&cfg.Replicas}, "replicas", fmt.Sprintf("how many heirs of each key (the nodes that take it over if its owner dies) keep a copy of its state: auto, a majority of the copies (1 heir with 2 or 3 nodes, 2 with 4 or 5, 3 from 6), so that the side of a split holding more than half of the nodes holds every key's count; or 0 (off) to %d", node.MaxReplicas))
	fs.DurationVar(&cfg.ReplicationInterval, "replication-interval", cfg.ReplicationInterval, "how often changed states are copied to their heirs: what a kill -9 of an owner may lose is what it admitted in this long")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory where the node keeps the states it changes (written every --data-sync-interval, each write synced) and loads them on start, so a restart keeps the counts; empty: nothing kept")
	fs.DurationVar(&cfg.DataSyncInterval, "data-sync-interval", cfg.DataSyncInterval, "with --data-dir, how often the states changed since the last write are written, in one synced transaction: a kill -9 or power loss loses what changed in at most this long; > 0, at most 1h")
	fs.DurationVar(&cfg.MaxLeaseTTL, "max-lease-ttl", cfg.MaxLeaseTTL, fmt.Sprintf("longest lease an Acquire may ask for, under an inline limit or a policy without max_ttl (a policy's max_ttl replaces it); a longer ttl is refused (INVALID_ARGUMENT); at most %s", policy.MaxLeaseTTL))
	fs.DurationVar(&cfg.BatchWindow, "batch-window", cfg.BatchWindow, "how long a forwarded check may wait to share an RPC to its owner (0: only while one is in flight)")
	fs.StringVar(&cfg.PolicyFile, "config", "", "YAML file of named policies; watched, and reloaded on SIGHUP")
	fs.StringVar(&cfg.RLSConfig, "rls-config", "", "envoyproxy/ratelimit configuration of the Envoy rate limit service (envoy.service.ratelimit.v3, on the gRPC port): a YAML file or a directory of them, one domain each; watched, and reloaded on SIGHUP (default: no domains, every descriptor OK)")
	var rlsXDS rlsXDSFlags
	rlsXDS.register(fs)
	mem := node.HostMemory()
	capBytes, capFrom := node.DefaultStoreMaxBytes(mem)
	cfg.Store.MaxBytes = capBytes
	fs.Var(int64Size(&cfg.Store.MaxBytes), "store-max-bytes", fmt.Sprintf("memory cap of stored limit state, e.g. 512MiB; new keys beyond it are refused with RESOURCE_EXHAUSTED (HTTP 503), stored ones keep working; 0: no cap; the default is %.0f%% of the memory available, here the %s", node.StoreMemoryShare*100, capFrom))
	cfg.Store.MaxKeysPerClient = node.DefaultMaxKeysPerClient(capBytes)
	fs.Int64Var(&cfg.Store.MaxKeysPerClient, "max-keys-per-client", cfg.Store.MaxKeysPerClient, fmt.Sprintf("under mTLS (--tls-client-ca-file), the most live keys one client identity may create on a node; a new key beyond it is refused with RESOURCE_EXHAUSTED (HTTP 503) naming this flag, its keys already stored keep working; clients without a certificate are not capped; 0: no cap; the default is %.0f%% of --store-max-bytes at %d B a key", node.ClientKeyShare*100, node.ClientKeyBytes))
	gcs := defaultGCSettings(os.LookupEnv, mem)
	gcPercent, memLimit := gcs.Percent, max(gcs.MemoryLimit, 0)
	fs.Var(gcPercentFlag{&gcPercent}, "gc-percent", fmt.Sprintf("Go GC percent (GOGC) of a large heap: between collections the heap may grow by this share of the live heap or by %s, whichever is more, but by no more than Go's default of 100%% (a value of 100 or more is used as is); the default is %d unless GOGC is set, which then stays in force%s", formatSize(gcMinHeadroom), defaultGCPercent, gcs.here(gcs.Percent == 0, gcs.describePercent())))
	fs.Var(int64Size(&memLimit), "memory-limit", fmt.Sprintf("Go soft memory limit (GOMEMLIMIT), e.g. 900MiB: the GC works harder as the process nears it; 0: none; the default is %.0f%% of the container's memory limit unless GOMEMLIMIT is set, which then stays in force%s", memoryLimitShare*100, gcs.here(true, gcs.describeMemoryLimit())))
	b := &cfg.Bounds
	fs.DurationVar(&b.HTTPReadHeaderTimeout, "http-read-header-timeout", node.DefaultHTTPReadHeaderTimeout, "HTTP: bound on reading a request's headers")
	fs.DurationVar(&b.HTTPReadTimeout, "http-read-timeout", node.DefaultHTTPReadTimeout, "HTTP: bound on reading a whole request, body included (a slower body is answered 408)")
	fs.DurationVar(&b.HTTPWriteTimeout, "http-write-timeout", node.DefaultHTTPWriteTimeout, "HTTP: bound from the end of a request's headers to the end of its answer")
	fs.DurationVar(&b.HTTPIdleTimeout, "http-idle-timeout", node.DefaultHTTPIdleTimeout, "HTTP: how long an idle keep-alive connection stays open (a proxy's upstream keep-alive should be shorter)")
	b.HTTPMaxHeaderBytes, b.HTTPMaxBodyBytes, b.GRPCMaxRecvBytes = node.DefaultHTTPMaxHeaderBytes, node.DefaultHTTPMaxBodyBytes, node.DefaultGRPCMaxRecvBytes
	fs.Var(intSizeFlag{&b.HTTPMaxHeaderBytes}, "http-max-header-bytes", "HTTP: bound on a request's headers (answered 431 beyond it)")
	fs.Var(int64Size(&b.HTTPMaxBodyBytes), "http-max-body-bytes", "HTTP: bound on a request's body (answered 413 beyond it)")
	fs.Var(intSizeFlag{&b.GRPCMaxRecvBytes}, "grpc-max-recv-bytes", "gRPC: bound on one received message (RESOURCE_EXHAUSTED beyond it)")
	fs.IntVar(&b.MaxConns, "max-conns", node.DefaultMaxConns, "open connections of each listener (gRPC, peer, HTTP); one more is closed at once")
	fs.IntVar(&b.MaxStreamsPerConn, "max-streams-per-conn", node.DefaultMaxStreamsPerConn, "gRPC and peer: concurrent streams (calls) of one connection")
	fs.IntVar(&b.MaxInflightPerConn, "max-inflight-per-conn", node.DefaultMaxInflightPerConn, "gRPC and peer: messages of one connection decided or answered at once, over all its streams (RESOURCE_EXHAUSTED beyond it)")
	fs.IntVar(&b.MaxInflight, "max-inflight", node.DefaultMaxInflight, "gRPC and peer: messages of each port decided or answered at once, the size of its work pool (RESOURCE_EXHAUSTED beyond it)")
	fs.Float64Var(&b.ShedMemoryShare, "shed-memory-share", node.DefaultShedMemoryShare, "share of the Go memory limit (--memory-limit) above which new work is refused (RESOURCE_EXHAUSTED, HTTP 503 with Retry-After) until memory falls, in (0, 1]; none without a memory limit")
	fs.BoolVar(&cfg.RLSShadowMode, "rls-shadow-mode", false, "Envoy rate limit service in global shadow mode (envoyproxy/ratelimit's SHADOW_MODE): answer OK overall when over a limit, still counting and reporting it")
	fs.BoolVar(&cfg.RLSResponseHeaders, "rls-response-headers", false, "add the rate limit headers of the descriptor closest to its limit to Envoy rate limit service responses (LIMIT_RESPONSE_HEADERS_ENABLED)")
	fs.StringVar(&cfg.RLSLimitHeader, "rls-limit-header", cfg.RLSLimitHeader, "name of the header of the limit, with --rls-response-headers (LIMIT_LIMIT_HEADER)")
	fs.StringVar(&cfg.RLSRemainingHeader, "rls-remaining-header", cfg.RLSRemainingHeader, "name of the header of the remaining hits, with --rls-response-headers (LIMIT_REMAINING_HEADER)")
	fs.StringVar(&cfg.RLSResetHeader, "rls-reset-header", cfg.RLSResetHeader, "name of the header of the seconds until the window resets, with --rls-response-headers (LIMIT_RESET_HEADER)")
	fs.Float64Var(&cfg.RLSNearLimitRatio, "rls-near-limit-ratio", cfg.RLSNearLimitRatio, "share of a limit, in (0, 1], above which hits count as near_limit (NEAR_LIMIT_RATIO)")
	fs.StringVar(&cfg.UIKeys, "ui-keys", "local", "to whom the status page (/ui on the HTTP port) shows hot keys, which may be sensitive: local (requests from loopback without proxy headers), always, or never; others see a key's hash")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "how long to drain in-flight calls on SIGTERM")
	fs.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&tracing, "tracing", false, "export traces of the gRPC calls (public, peer) over OTLP/gRPC, configured by the standard OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER...); OTEL_TRACES_EXPORTER=otlp turns it on too")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile (go tool pprof) of the whole run to this file")
	describeEnv(fs)
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	cfg.Join = join
	cfg.AdminNames = adminNames
	cfg.RLSXDS = rlsXDS.settings()
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["gc-percent"] {
		gcs.Percent, gcs.PercentFrom = gcPercent, "--gc-percent"
	}
	if given["memory-limit"] {
		gcs.MemoryLimit, gcs.MemoryLimitFrom = memLimit, "--memory-limit"
		if !given["store-max-bytes"] {
			// The memory available counts the Go memory limit in force.
			mem.GoMemLimit = func() int64 { return cmp.Or(memLimit, math.MaxInt64) }
			cfg.Store.MaxBytes, capFrom = node.DefaultStoreMaxBytes(mem)
		}
	}
	if !given["max-keys-per-client"] {
		cfg.Store.MaxKeysPerClient = node.DefaultMaxKeysPerClient(cfg.Store.MaxBytes)
	}
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
	tp, err := newTracerProvider(ctx, tracing, os.Getenv)
	if err != nil {
		return err
	}
	if tp != nil {
		cfg.TracerProvider = tp // the node shuts it down, flushing its spans
	}
	n, err := node.New(cfg)
	if err != nil {
		if tp != nil {
			_ = tp.Shutdown(context.Background())
		}
		return nameFlags(err) // the flags, not node.Config's fields
	}
	stopProfile, err := startCPUProfile(cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	gcCtx, stopGC := context.WithCancel(ctx)
	waitGC := gcs.start(gcCtx)
	defer waitGC()
	defer stopGC()
	cfg.Logger.Info("starting sluice", "version", version.String(), "node", cfg.NodeName,
		"store_max_bytes", cfg.Store.MaxBytes, "store_max_bytes_default_from", capFrom,
		"max_keys_per_client", cfg.Store.MaxKeysPerClient,
		"gc_percent", gcs.describePercent(), "memory_limit", gcs.describeMemoryLimit())
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
	return nameFlags(n.Run(ctx)) // e.g. a --node-name another member has
}
