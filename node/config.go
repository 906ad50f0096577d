package node

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-rl/sluice/api"
	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/persist"
	"github.com/sluice-rl/sluice/internal/tlsconfig"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/rls/xds"
	"github.com/sluice-rl/sluice/store"
)

// ErrInvalidConfig wraps every Config validation error.
var ErrInvalidConfig = errors.New("node: invalid config")

// Config configures a Node.
type Config struct {
	// NodeName identifies the node in results and, later, in the cluster.
	// Empty means the host name.
	NodeName string
	// GRPCAddr is the gRPC listen address (sluice.v1, the Envoy rate limit
	// service envoy.service.ratelimit.v3, health, reflection).
	GRPCAddr string
	// HTTPAddr is the HTTP listen address (/v1/check, /v1/usage, /healthz,
	// /readyz, /metrics, the status page /ui).
	HTTPAddr string
	// GRPCAdvertiseAddr is the public gRPC address of this node, gossiped
	// to the others and given to clients by the Membership API.
	// Empty means the gRPC listener's address, with the gossip advertise
	// host when the listener is bound to all interfaces.
	GRPCAdvertiseAddr string
	// PeerAddr is the listen address of the peer service (sluice.v1.Peer:
	// forwarded checks, leases, handoff, fetch), which only other nodes
	// call. It is served there alone, never on GRPCAddr, so that a
	// NetworkPolicy can admit only peers to it.
	PeerAddr string
	// PeerAdvertiseAddr is the peer address other nodes dial, gossiped in
	// the node's metadata. Empty means the peer listener's address, with
	// the gossip advertise host when the listener is bound to all
	// interfaces.
	PeerAdvertiseAddr string
	// TLSCertFile is the PEM certificate chain (leaf first) of the public
	// gRPC and HTTP listeners. Set (with TLSKeyFile), both speak TLS only,
	// version 1.2 at least. The file is re-read when it changes (checked
	// at a handshake, at most every TLSCheckInterval): a rotation needs no
	// restart and cuts no connection.
	TLSCertFile string
	// TLSKeyFile is the PEM private key of TLSCertFile; required with it.
	TLSKeyFile string
	// TLSClientCAFile is a PEM bundle of the CAs of the public listeners'
	// clients. Set, every client must present a certificate that one of
	// them verifies (mTLS). Requires TLSCertFile. Re-read like it.
	TLSClientCAFile string
	// PeerTLSCertFile is this node's peer certificate, served on PeerAddr
	// and presented when dialing other nodes; empty means TLSCertFile. When
	// there is one (set or by default), peer security is on: the peer
	// listener requires a client certificate verified by PeerTLSCAFile, a
	// node dials its peers with this certificate and verifies theirs
	// against PeerTLSCAFile under the name PeerTLSName, and the peer
	// service refuses (PermissionDenied) any caller whose certificate is
	// not a peer's (see tlsconfig.PeerAuth). The certificate must carry
	// PeerTLSName as a DNS SAN and both the server and client extended key
	// usages.
	PeerTLSCertFile string
	// PeerTLSKeyFile is the PEM private key of PeerTLSCertFile; empty
	// means TLSKeyFile.
	PeerTLSKeyFile string
	// PeerTLSCAFile is the PEM bundle of the peer CA, which issues the
	// peers' certificates; empty means TLSClientCAFile. Required when peer
	// security is on.
	PeerTLSCAFile string
	// PeerTLSName is the DNS SAN that makes a certificate a peer's, and
	// the server name a node expects when it dials a peer. Empty means
	// tlsconfig.DefaultPeerName, "sluice-peer".
	PeerTLSName string
	// TLSCheckInterval is how often, at most, the certificate files are
	// checked for a change, at a handshake; 0 means 1s, a negative value
	// checks at every handshake (tests).
	TLSCheckInterval time.Duration
	// GossipAddr is the memberlist bind address, "ip:port".
	GossipAddr string
	// GossipAdvertiseAddr is the gossip address other nodes reach this one
	// at; empty means derived from GossipAddr (see cluster.Config).
	GossipAdvertiseAddr string
	// Join lists host:port gossip seeds; a host may be a DNS name with
	// several addresses (a StatefulSet's headless Service). Empty means a
	// cluster of one that others may join.
	Join []string
	// GossipKeyFile, if not empty, encrypts gossip with the keyring in this
	// file: one base64 AES key (16, 24 or 32 bytes) per line, the first
	// the primary that encrypts, all accepted for decryption (see
	// cluster.LoadGossipKeyFile). Nodes with another key, or none, do not
	// join. The file is watched and re-read on SIGHUP (Reload), so keys
	// rotate without a restart; a bad file keeps the keyring in force and
	// counts in sluice_gossip_key_reloads_total{result="rejected"}. A bad
	// file at start is an error of New. Empty means gossip in clear text.
	GossipKeyFile string
	// ClusterSecretFile, if not empty, authenticates the cluster with one
	// shared secret: the file holds one secret per line, standard base64
	// of 32 to 64 random bytes (`openssl rand -base64 32`), the first the
	// primary, every one accepted (see package clustersecret). From it
	// HKDF derives the gossip encryption keys (AES-256) and an Ed25519
	// peer identity: the peer port speaks TLS 1.3 and admits only nodes
	// that present the identity of an accepted secret, and gossip is
	// encrypted and refused without an accepted key. The file is watched
	// and re-read on SIGHUP (Reload), so a secret rotates without a
	// restart. Not with GossipKeyFile or PeerTLSCertFile.
	ClusterSecretFile string
	// AdminNames are the client certificate names (subject common name,
	// or a DNS, URI or e-mail SAN of a certificate the public listeners'
	// mTLS verified) allowed the admin calls, sluice.v1.Admin and
	// /v1/admin/... (inspect and reset a key).
	AdminNames []string
	// AdminTokenFile, if not empty, holds admin bearer tokens: one a line,
	// standard base64 of at least 16 random bytes (`openssl rand -base64
	// 32`), '#' comments; a caller presents one as "authorization: Bearer
	// TOKEN". The file is re-read when it changes (checked at an admin
	// call, at most once a second); a bad file then keeps the tokens in
	// force. A bad file at start is an error of New. With neither this
	// nor AdminNames, admin calls are refused.
	AdminTokenFile string
	// Insecure runs the cluster without authentication: no secret, no
	// peer mTLS, and peer and gossip ports open to anyone who reaches
	// them. A node without any of ClusterSecretFile, peer mTLS and
	// Insecure refuses to start with a Join list, and without one is a
	// cluster of one: its peer and gossip listeners on 127.0.0.1, other
	// nodes refused. Insecure logs a WARN at every start, sets
	// sluice_insecure to 1 and shows on /ui.
	Insecure bool
	// ClusterPreset selects memberlist timings: "lan" or "local" (tests),
	// and those of the Raft group of the ring's epochs (epoch.LANConfig,
	// epoch.FastConfig).
	ClusterPreset string
	// BootstrapExpect is how many nodes, this one included, must see each
	// other, none of them in a Raft group of the ring's epochs yet, before
	// the lowest-named of them founds the group (docs/cluster.md, "The
	// ring's epochs"). 0 takes the default: 1 without Join (a group of one
	// at once), else the number of distinct Join entries and at least 2
	// (the usual list names every node, this one included). Must be 0 or
	// more.
	BootstrapExpect int
	// Ring configures consistent hashing; every node must use the same.
	Ring ring.Config
	// PeerTimeout bounds each call to another node.
	PeerTimeout time.Duration
	// BatchWindow is how long a forwarded check may wait to share an RPC
	// with others to the same owner; 0 batches only what queues while an
	// RPC is in flight (no wait when idle).
	BatchWindow time.Duration
	// Grants configures local token grants for hot keys.
	Grants limiter.GrantConfig
	// LeaveLinger is how long a leaving node keeps serving after handing
	// off, so that nodes whose ring has not caught up are still answered.
	LeaveLinger time.Duration
	// PolicyFile is an optional YAML file of named policies. It is watched
	// and reloaded within a second of a change (a Kubernetes ConfigMap's
	// "..data" swap too), and on SIGHUP (Reload); an invalid change keeps
	// the policies in force and counts in
	// sluice_policy_reloads_total{result="rejected"}. The node gossips the
	// policies' hash (policy.Set.Hash) in its metadata.
	PolicyFile string
	// RLSConfig is the envoyproxy/ratelimit configuration of the Envoy
	// rate limit service: one YAML file, or a directory of them (each file
	// one domain; a Kubernetes ConfigMap mount works). It is watched and
	// reloaded within a second of a change, and on SIGHUP (Reload); an
	// invalid change keeps the configuration in force. Empty serves the
	// service with no domains: every domain is unknown, so every
	// descriptor is answered OK, as the reference answers an unknown
	// domain. An invalid file at start is an error of New.
	RLSConfig string
	// RLSXDS, if not nil, takes the RLS configuration over xDS instead of
	// RLSConfig, as envoyproxy/ratelimit does with
	// CONFIG_TYPE=GRPC_XDS_SOTW (package rls/xds): a pushed configuration
	// is applied with the counters kept and ACKed, an invalid one NACKed
	// and the one in force kept. Until the first push there are no
	// domains. Not with RLSConfig.
	RLSXDS *xds.Settings
	// RLSMaxMetricKeys caps the request-derived series of the RLS metrics
	// (see api.RLSConfig.MaxMetricKeys); 0 means the default.
	RLSMaxMetricKeys int
	// UIKeys says to whom the status page (/ui) shows hot keys' strings:
	// "local" (or empty) to requests from loopback without proxy headers,
	// "always", or "never"; others see the keys' hashes (api.KeyDisplay).
	UIKeys string
	// Bounds limit what callers may send and how long a connection may
	// last (HTTP timeouts, header and body sizes, gRPC message size);
	// zero fields take the defaults (see Bounds).
	Bounds Bounds
	// RLSShadowMode is envoyproxy/ratelimit's global shadow mode
	// (SHADOW_MODE): a call over a limit is answered OK overall (its
	// descriptor statuses keep OVER_LIMIT) and counted in
	// ratelimit_service_global_shadow_mode; the counters count as always.
	RLSShadowMode bool
	// RLSResponseHeaders adds the reference's rate limit headers
	// (LIMIT_RESPONSE_HEADERS_ENABLED) to every RLS response with a limited
	// descriptor: RLSLimitHeader, RLSRemainingHeader and RLSResetHeader
	// (LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER),
	// of the descriptor closest to its limit.
	RLSResponseHeaders bool
	// RLSLimitHeader names the header of the limit (requests per unit);
	// DefaultConfig: RateLimit-Limit. Required with RLSResponseHeaders.
	RLSLimitHeader string
	// RLSRemainingHeader names the header of the remaining hits;
	// DefaultConfig: RateLimit-Remaining. Required with RLSResponseHeaders.
	RLSRemainingHeader string
	// RLSResetHeader names the header of the seconds until the window
	// resets; DefaultConfig: RateLimit-Reset. Required with
	// RLSResponseHeaders.
	RLSResetHeader string
	// RLSNearLimitRatio is the share of a limit above which hits count as
	// near_limit (NEAR_LIMIT_RATIO), in (0, 1]; DefaultConfig: 0.8.
	RLSNearLimitRatio float64
	// Store configures the key store (shards, memory cap). Store.MaxBytes
	// 0 means no cap; DefaultConfig sets it from the memory available
	// (see DefaultStoreMaxBytes).
	Store store.Config
	// SweepInterval is how often expired states are dropped from the store.
	SweepInterval time.Duration
	// Replicas is how many heirs of each key (the nodes that take it over
	// if its owner dies) keep a copy of its state: ReplicasAuto (a
	// majority of the copies, limiter.AutoReplicas of the ring's members:
	// 1 heir with 2 or 3 nodes, 2 with 4 or 5, 3 from 6), 0 (off), or 1 to
	// limiter.MaxReplicas; DefaultConfig: ReplicasAuto. See
	// docs/failure.md.
	Replicas int
	// ReplicationInterval is how often the states changed since the last
	// round are sent to their heirs: a kill -9 of an owner loses what it
	// admitted in at most this long. Must be > 0 with Replicas;
	// DefaultConfig: 50ms.
	ReplicationInterval time.Duration
	// DataDir, if set, is the directory where the node keeps the states it
	// changes (--data-dir; internal/persist), written every
	// DataSyncInterval by a background writer, each write synced, and
	// loaded when the node starts, so that a restart keeps the counts but
	// the last interval's. It is locked: two processes never share one.
	// Empty (DefaultConfig): nothing is kept. See docs/failure.md.
	DataDir string
	// DataSyncInterval is how often the states changed since the last
	// write go to DataDir, in one synced transaction (--data-sync-interval):
	// a kill -9 or power loss loses what changed in at most this long.
	// Must be in (0, persist.MaxSyncInterval] with DataDir; DefaultConfig: 1s.
	DataSyncInterval time.Duration
	// MaxLeaseTTL is the longest lease an Acquire may ask for under an
	// inline limit or a policy without max_ttl, in [0,
	// limiter.MaxLeaseTTL]; 0 means limiter.DefaultMaxLeaseTTL.
	MaxLeaseTTL time.Duration
	// ShutdownTimeout bounds the drain of in-flight calls on shutdown.
	ShutdownTimeout time.Duration
	// Clock returns the current time; nil means time.Now. Tests inject a fake.
	Clock func() time.Time
	// Logger receives the node's logs; nil means slog.Default().
	Logger *slog.Logger
	// TracerProvider, if set, traces the node's gRPC calls: the public
	// server's and the peer server's RPCs (otelgrpc server stats
	// handlers), and the peer client's, whose W3C trace context the owner
	// continues. nil means no tracing, and no stats handler installed.
	// The node owns it: when the provider has a Shutdown method (the SDK's
	// does), the node calls it when it stops, which flushes its spans.
	TracerProvider trace.TracerProvider

	// peerBreakerClock, if not nil, times the peer circuit breakers'
	// cooldowns instead of time.Now. Only tests set it (export_test.go):
	// on a frozen clock, an open circuit stays open.
	peerBreakerClock func() time.Time
}

// ReplicasAuto is Config.Replicas for a majority of the copies: each key
// has limiter.AutoReplicas(N) heirs on a ring of N members, so that a side
// of a split holding more than half of the members holds a copy of every
// key's count (docs/failure.md). `--replicas auto`, the default.
const ReplicasAuto = -1

// MaxReplicas is the most heirs Config.Replicas may ask for.
const MaxReplicas = limiter.MaxReplicas

// AutoReplicas is the number of heirs ReplicasAuto gives each key on a
// ring of n members: ⌊n/2⌋, at most MaxReplicas (limiter.AutoReplicas).
func AutoReplicas(n int) int { return limiter.AutoReplicas(n) }

// limiterReplicas is limiter.Config.Replicas for Config.Replicas r (0 is
// off here, auto there).
func limiterReplicas(r int) int {
	switch r {
	case ReplicasAuto:
		return 0
	case 0:
		return -1
	}
	return r
}

// DefaultConfig is the configuration of `sluice serve` with no flags: a
// single node that is a whole cluster of one, its store capped at
// DefaultStoreMaxBytes(HostMemory()).
func DefaultConfig() Config {
	host, _ := os.Hostname()
	if host == "" {
		host = "sluice"
	}
	st := store.DefaultConfig()
	st.MaxBytes, _ = DefaultStoreMaxBytes(HostMemory())
	st.MaxKeysPerClient = DefaultMaxKeysPerClient(st.MaxBytes)
	return Config{
		NodeName:        host,
		GRPCAddr:        ":8081",
		HTTPAddr:        ":8080",
		PeerAddr:        ":8082",
		PeerTLSName:     tlsconfig.DefaultPeerName,
		GossipAddr:      ":7946",
		ClusterPreset:   cluster.PresetLAN,
		Ring:            ring.DefaultConfig(),
		PeerTimeout:     500 * time.Millisecond,
		LeaveLinger:     2 * time.Second,
		Store:           st,
		SweepInterval:   10 * time.Second,
		ShutdownTimeout: 30 * time.Second,
		MaxLeaseTTL:     limiter.DefaultMaxLeaseTTL,

		Replicas:            ReplicasAuto,
		ReplicationInterval: 50 * time.Millisecond,
		DataSyncInterval:    persist.DefaultSyncInterval,

		RLSLimitHeader:     api.DefaultLimitHeader,
		RLSRemainingHeader: api.DefaultRemainingHeader,
		RLSResetHeader:     api.DefaultResetHeader,
		RLSNearLimitRatio:  api.DefaultNearLimitRatio,
	}
}

// LocalConfig is a preset for tests: every listener on 127.0.0.1:0 and a
// quiet logger.
func LocalConfig(name string) Config {
	c := DefaultConfig()
	c.NodeName = name
	c.GRPCAddr = "127.0.0.1:0"
	c.HTTPAddr = "127.0.0.1:0"
	c.PeerAddr = "127.0.0.1:0"
	c.GossipAddr = "127.0.0.1:0"
	c.ClusterPreset = cluster.PresetLocal
	c.LeaveLinger = 300 * time.Millisecond
	c.ShutdownTimeout = 10 * time.Second
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
	case c.UIKeys != "" && !validUIKeys(c.UIKeys):
		return fmt.Errorf("%w: UIKeys: %q: want local, always or never", ErrInvalidConfig, c.UIKeys)
	case c.HTTPAddr == "":
		return fmt.Errorf("%w: HTTPAddr: must not be empty", ErrInvalidConfig)
	case c.PeerAddr == "":
		return fmt.Errorf("%w: PeerAddr: must not be empty", ErrInvalidConfig)
	case c.GossipAddr == "":
		return fmt.Errorf("%w: GossipAddr: must not be empty", ErrInvalidConfig)
	case c.PeerTimeout <= 0:
		return fmt.Errorf("%w: PeerTimeout: must be > 0", ErrInvalidConfig)
	case c.BootstrapExpect < 0:
		return fmt.Errorf("%w: BootstrapExpect: must be >= 0 (0: from Join), got %d", ErrInvalidConfig, c.BootstrapExpect)
	case c.LeaveLinger < 0:
		return fmt.Errorf("%w: LeaveLinger: must be >= 0", ErrInvalidConfig)
	case c.SweepInterval <= 0:
		return fmt.Errorf("%w: SweepInterval: must be > 0", ErrInvalidConfig)
	case c.Replicas < ReplicasAuto || c.Replicas > limiter.MaxReplicas:
		return fmt.Errorf("%w: Replicas: must be ReplicasAuto (%d, by the ring's size), 0 (off) or 1 to %d, got %d", ErrInvalidConfig, ReplicasAuto, limiter.MaxReplicas, c.Replicas)
	case c.Replicas != 0 && c.ReplicationInterval <= 0:
		return fmt.Errorf("%w: ReplicationInterval: must be > 0 with Replicas %d", ErrInvalidConfig, c.Replicas)
	case c.DataDir != "" && c.ReplicationInterval <= 0:
		return fmt.Errorf("%w: ReplicationInterval: must be > 0 with DataDir", ErrInvalidConfig)
	case c.DataDir != "" && (c.DataSyncInterval <= 0 || c.DataSyncInterval > persist.MaxSyncInterval):
		return fmt.Errorf("%w: DataSyncInterval: must be in (0, %s] with DataDir, got %s", ErrInvalidConfig, persist.MaxSyncInterval, c.DataSyncInterval)
	case c.MaxLeaseTTL < 0 || c.MaxLeaseTTL > limiter.MaxLeaseTTL:
		return fmt.Errorf("%w: MaxLeaseTTL: must be in [0, %s] (0 = %s), got %s", ErrInvalidConfig, limiter.MaxLeaseTTL, limiter.DefaultMaxLeaseTTL, c.MaxLeaseTTL)
	case slices.Contains(c.AdminNames, ""):
		return fmt.Errorf("%w: AdminNames: must not hold an empty name", ErrInvalidConfig)
	case c.ShutdownTimeout <= 0:
		return fmt.Errorf("%w: ShutdownTimeout: must be > 0", ErrInvalidConfig)
	case c.RLSXDS != nil && c.RLSConfig != "":
		return fmt.Errorf("%w: RLSXDS: the RLS configuration comes over xDS or from RLSConfig, not both", ErrInvalidConfig)
	case c.RLSMaxMetricKeys < 0:
		return fmt.Errorf("%w: RLSMaxMetricKeys: must be >= 0", ErrInvalidConfig)
	case !(c.RLSNearLimitRatio > 0 && c.RLSNearLimitRatio <= 1):
		return fmt.Errorf("%w: RLSNearLimitRatio: must be in (0, 1], got %v", ErrInvalidConfig, c.RLSNearLimitRatio)
	}
	if c.RLSXDS != nil {
		if err := c.RLSXDS.Validate(); err != nil {
			return xdsSettingsErr(err)
		}
	}
	if c.RLSResponseHeaders {
		for _, h := range []struct{ field, name string }{
			{"RLSLimitHeader", c.RLSLimitHeader}, {"RLSRemainingHeader", c.RLSRemainingHeader}, {"RLSResetHeader", c.RLSResetHeader},
		} {
			if !validHeaderName(h.name) {
				return fmt.Errorf("%w: %s: %q is not an HTTP header name", ErrInvalidConfig, h.field, h.name)
			}
		}
	}
	if err := c.validateTLS(); err != nil {
		return err
	}
	return c.Bounds.validate()
}

// validHeaderName reports whether s is an HTTP header field name (an RFC
// 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// xdsSettingsErr names an rls/xds settings error's field as RLSXDS.Field.
func xdsSettingsErr(err error) error {
	var se *xds.SettingsError
	if errors.As(err, &se) {
		return fmt.Errorf("%w: RLSXDS.%s: %s", ErrInvalidConfig, se.Field, se.Reason)
	}
	return fmt.Errorf("%w: RLSXDS: %w", ErrInvalidConfig, err)
}
