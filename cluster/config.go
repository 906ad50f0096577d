package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// Preset names, for Config.Preset.
const (
	// PresetLAN is memberlist.DefaultLANConfig unchanged: 1s probes with a
	// 500ms timeout, gossip every 200ms, push/pull every 30s, a suspicion
	// timeout of 4 probe intervals (scaled by log10 of the cluster size).
	// It is the preset for deployments.
	PresetLAN = "lan"
	// PresetLocal is memberlist.DefaultLocalConfig made faster still, for
	// tests on loopback: 300ms probes with a 250ms timeout (loose enough
	// for a loaded 2-core machine running the race detector), gossip every
	// 50ms, push/pull every second, a suspicion timeout of 4 probe
	// intervals (1.2s, up to 7s without confirmations from other members),
	// dead members forgotten after 5s. A crashed member is dropped after
	// about two to five seconds.
	PresetLocal = "local"
)

// Defaults applied by New to zero fields of a Config.
const (
	// DefaultPort is the gossip port LANConfig binds (memberlist's).
	DefaultPort = 7946
	// DefaultJoinRetry is the interval between join attempts.
	DefaultJoinRetry = time.Second
	// DefaultRejoin is the interval at which seeds that are not members
	// are contacted again.
	DefaultRejoin = 30 * time.Second
	// DefaultSettle is how long the membership must stay unchanged before
	// Run delivers a new snapshot.
	DefaultSettle = 50 * time.Millisecond
)

// Config configures a Cluster. Start from LANConfig or LocalConfig and
// override fields; the zero value of an optional field means its default.
// A Config is copied by New and not retained.
type Config struct {
	// NodeName identifies this node in the cluster. It must be unique among
	// the members: a node whose join finds its name alive at another
	// address refuses the join and Run returns ErrNameTaken; memberlist
	// ignores any other node announcing a name alive elsewhere (see
	// Config.Logger for the conflict warning). Required.
	NodeName string

	// BindAddr is the "ip:port" the gossip listeners (UDP and TCP, same
	// port) bind to. The host must be an IP address; "0.0.0.0" or an empty
	// host binds every interface. Port 0 picks a free port; GossipAddr
	// reports the real one. Required.
	BindAddr string

	// AdvertiseAddr is the "ip:port" other members reach this node at. Empty
	// means derived from BindAddr (memberlist's behaviour): the bound IP, or
	// when bound to all interfaces a private IP of this host, with the bound
	// port. Set it when the bound address is not the one others can reach
	// (0.0.0.0 in a pod: use the pod IP). Port 0 means the bound port; it
	// must be 0 when BindAddr's port is 0.
	AdvertiseAddr string

	// Join lists the seeds contacted to join a cluster, each "host:port".
	// A host may be an IP address or a DNS name with several A/AAAA records
	// (a StatefulSet's headless Service): every address is contacted, and
	// names are resolved again at each attempt. This node's own address is
	// skipped, so every member may be given the same list. Empty means this
	// node starts a cluster of one that others join.
	Join []string

	// JoinRetry is the interval between join attempts while no seed
	// answers (pods starting at once find no one at first). Zero means
	// DefaultJoinRetry.
	JoinRetry time.Duration

	// Rejoin is the interval at which, once joined, seeds whose addresses
	// are not members are contacted again. This merges clusters that
	// formed separately and heals partitions that lasted longer than
	// memberlist's own reconnection window (it gossips to dead members for
	// a while only). An address already known as a member costs nothing.
	// Zero means DefaultRejoin; a negative value disables rejoining.
	Rejoin time.Duration

	// Meta is advertised to the other members with this node's gossip
	// messages; they see it in Member.GRPCAddr and Member.Version. Its
	// encoding must fit memberlist.MetaMaxSize (512 bytes). Change it later
	// with Cluster.UpdateMeta.
	Meta NodeMeta

	// Preset selects memberlist's timings: PresetLAN ("lan", used when
	// empty) or PresetLocal ("local").
	Preset string

	// OnChange, if not nil, is called with the current snapshot when Run
	// starts and with every new snapshot after that. Calls are serial, from
	// the goroutine running Run, with increasing Snapshot.Version; bursts
	// of changes are coalesced, so versions may be skipped. OnChange must
	// not block for long (it delays later snapshots, never memberlist) and
	// must not call Run.
	OnChange func(Snapshot)

	// Settle is how long Run waits, after a membership change, for the
	// membership to stop changing before it delivers the new snapshot to
	// OnChange: a push/pull (a join above all) reports the members it
	// brings one at a time, and a snapshot taken halfway would give a
	// joining node a ring without some of the members, whose keys it would
	// then serve without their counters. A burst that keeps changing is
	// delivered after at most 10 times Settle. Zero means DefaultSettle; a
	// negative value delivers every change at once.
	Settle time.Duration

	// GossipKeyFile, if not empty, turns on gossip encryption: the file
	// holds the keyring, one base64 AES key per line, the first the
	// primary that encrypts, every one accepted for decryption (see
	// LoadGossipKeyFile for the format). Every message and push/pull
	// stream is then encrypted and authenticated (AES-GCM), and
	// unencrypted ones are refused both ways (memberlist's
	// GossipVerifyIncoming and GossipVerifyOutgoing), so a node with
	// another key, or with none, cannot join. New reads the file (a bad
	// one is a *ConfigError for "GossipKeyFile" naming the file and line);
	// Run watches it and ReloadGossipKeys re-reads it, updating the keyring
	// in place, which is how keys are rotated without a restart (see the
	// package documentation). Empty means gossip in clear text.
	GossipKeyFile string

	// GossipKeys, if not empty and GossipKeyFile is, turns on gossip
	// encryption as GossipKeyFile does, with these keys (16, 24 or 32
	// bytes each), the first the primary. They are not watched: rotate
	// them with Cluster.SetGossipKeys. Keys derived from a cluster secret
	// come this way. Not with GossipKeyFile.
	GossipKeys [][]byte

	// Alone makes this node a cluster of one that refuses every other
	// node: a join to it fails (its push/pull is refused), and gossip
	// about any other node is ignored; each refusal is logged. It is the
	// node without cluster authentication (no secret, no peer mTLS) and
	// no Join list. Not with Join.
	Alone bool

	// KeyDebounce is how long the watch of GossipKeyFile waits after a
	// change before re-reading the file. Zero means DefaultKeyDebounce.
	KeyDebounce time.Duration

	// Logger receives this package's messages and memberlist's own log
	// output, the latter at slog.LevelDebug with memberlist's severity in
	// the "memberlist_level" attribute. Nil discards both.
	Logger *slog.Logger
}

// LANConfig returns a Config for a deployment: the "lan" preset, bound to
// 0.0.0.0:7946 on every interface, retrying joins every second and
// re-contacting missing seeds every 30 seconds.
func LANConfig(name string) Config {
	return Config{
		NodeName:  name,
		BindAddr:  net.JoinHostPort("0.0.0.0", strconv.Itoa(DefaultPort)),
		JoinRetry: DefaultJoinRetry,
		Rejoin:    DefaultRejoin,
		Settle:    DefaultSettle,
		Preset:    PresetLAN,
	}
}

// LocalConfig returns a Config for tests and single-host experiments: the
// "local" preset, bound to 127.0.0.1 on a free port, retrying joins every
// 200ms and re-contacting missing seeds every 2 seconds.
func LocalConfig(name string) Config {
	return Config{
		NodeName:  name,
		BindAddr:  "127.0.0.1:0",
		JoinRetry: 200 * time.Millisecond,
		Rejoin:    2 * time.Second,
		Settle:    20 * time.Millisecond,
		Preset:    PresetLocal,
	}
}

// ErrInvalidConfig is wrapped by every *ConfigError: errors.Is(err,
// ErrInvalidConfig) holds for an error of New or UpdateMeta caused by a
// bad Config or NodeMeta.
var ErrInvalidConfig = errors.New("cluster: invalid config")

// ConfigError reports an invalid Config field. New returns one, or several
// joined with errors.Join, wrapped in nothing else. It wraps
// ErrInvalidConfig, and reads "cluster: invalid config: Field: reason".
type ConfigError struct {
	// Field names the field, as in the Config struct: "BindAddr",
	// "Join[2]", "Meta.GRPCAddr".
	Field string
	// Reason says what is wrong with it.
	Reason string
}

func (e *ConfigError) Error() string {
	return ErrInvalidConfig.Error() + ": " + e.Field + ": " + e.Reason
}

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// withDefaults returns c with the zero optional fields set to their
// defaults.
func (c Config) withDefaults() Config {
	if c.JoinRetry == 0 {
		c.JoinRetry = DefaultJoinRetry
	}
	if c.Rejoin == 0 {
		c.Rejoin = DefaultRejoin
	}
	if c.Preset == "" {
		c.Preset = PresetLAN
	}
	if c.KeyDebounce == 0 {
		c.KeyDebounce = DefaultKeyDebounce
	}
	if c.Settle == 0 {
		c.Settle = DefaultSettle
	}
	if c.Join != nil {
		c.Join = append([]string(nil), c.Join...)
	}
	if c.GossipKeys != nil {
		c.GossipKeys = slices.Clone(c.GossipKeys)
	}
	return c
}

// validate checks every field and returns all problems found, each a
// *ConfigError naming its field, or nil.
func (c Config) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}

	if c.NodeName == "" {
		bad("NodeName", "is required")
	}

	_, bindPort, bindErr := parseIPPort(c.BindAddr)
	switch {
	case c.BindAddr == "":
		bad("BindAddr", "is required")
	case bindErr != nil:
		bad("BindAddr", "%v", bindErr)
	}

	if c.AdvertiseAddr != "" {
		ip, advPort, err := parseIPPort(c.AdvertiseAddr)
		switch {
		case err != nil:
			bad("AdvertiseAddr", "%v", err)
		case ip == nil || ip.IsUnspecified():
			bad("AdvertiseAddr", "%q is not an address others can reach", c.AdvertiseAddr)
		case advPort != 0 && bindPort == 0 && bindErr == nil:
			bad("AdvertiseAddr", "port must be 0 when BindAddr's port is 0 (memberlist then advertises the port it bound), got %d", advPort)
		}
	}

	for i, seed := range c.Join {
		if _, _, err := parseSeed(seed); err != nil {
			bad(fmt.Sprintf("Join[%d]", i), "%v", err)
		}
	}

	if c.JoinRetry < 0 {
		bad("JoinRetry", "must not be negative, got %v", c.JoinRetry)
	}

	errs = append(errs, c.Meta.validate()...)

	if c.KeyDebounce < 0 {
		bad("KeyDebounce", "must not be negative, got %v", c.KeyDebounce)
	}
	// GossipKeyFile's contents are checked by New, which reads the file.
	if c.GossipKeyFile != "" && len(c.GossipKeys) > 0 {
		bad("GossipKeys", "not with GossipKeyFile: one source of gossip keys")
	}
	for i, key := range c.GossipKeys {
		if n := len(key); n != 16 && n != 24 && n != 32 {
			bad(fmt.Sprintf("GossipKeys[%d]", i), "key is %d bytes, want 16, 24 or 32", n)
		}
	}
	if c.Alone && len(c.Join) > 0 {
		bad("Alone", "not with Join: a node alone joins no one")
	}

	switch c.Preset {
	case PresetLAN, PresetLocal:
	default:
		bad("Preset", "must be %q or %q, got %q", PresetLAN, PresetLocal, c.Preset)
	}

	return errors.Join(errs...)
}

// parseIPPort parses "ip:port" where the host is an IP address or empty
// (returned as nil) and the port is in 0..65535.
func parseIPPort(s string) (net.IP, int, error) {
	host, portStr, err := net.SplitHostPort(s)
	if err != nil {
		return nil, 0, fmt.Errorf("must be ip:port, got %q", s)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, 0, fmt.Errorf("port must be a number in 0..65535, got %q", portStr)
	}
	if host == "" {
		return nil, int(port), nil
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, 0, fmt.Errorf("host must be an IP address, got %q", host)
	}
	return ip, int(port), nil
}

// parseSeed parses a seed "host:port" with a non-empty host and a port in
// 1..65535.
func parseSeed(s string) (host string, port uint16, err error) {
	host, portStr, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("must be host:port, got %q", s)
	}
	if host == "" {
		return "", 0, fmt.Errorf("host is empty in %q", s)
	}
	p, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || p == 0 {
		return "", 0, fmt.Errorf("port must be a number in 1..65535, got %q", portStr)
	}
	return host, uint16(p), nil
}

// memberlistConfig translates a validated Config into memberlist's. The
// delegates and the logger are set by New.
func (c Config) memberlistConfig() *memberlist.Config {
	var mc *memberlist.Config
	switch c.Preset {
	case PresetLocal:
		mc = memberlist.DefaultLocalConfig()
		mc.ProbeInterval = 300 * time.Millisecond
		mc.ProbeTimeout = 250 * time.Millisecond
		mc.SuspicionMult = 4
		mc.GossipInterval = 50 * time.Millisecond
		mc.PushPullInterval = time.Second
		mc.GossipToTheDeadTime = 5 * time.Second
	default:
		mc = memberlist.DefaultLANConfig()
	}
	mc.Name = c.NodeName
	// A node restarted at a new address under its old name (a StatefulSet
	// pod rescheduled with a new IP) takes its name back as soon as the
	// old incarnation has been dead for a probe interval, instead of being
	// ignored until memberlist forgets the dead one (GossipToTheDeadTime,
	// 30s on a LAN). A live holder of the name still refuses it
	// (ErrNameTaken).
	mc.DeadNodeReclaimTime = mc.ProbeInterval

	bindIP, bindPort, _ := parseIPPort(c.BindAddr)
	mc.BindAddr = "0.0.0.0"
	if bindIP != nil {
		mc.BindAddr = bindIP.String()
	}
	mc.BindPort = bindPort
	// With BindPort 0 memberlist replaces AdvertisePort with the port it
	// got; otherwise the advertised port defaults to the bound one.
	mc.AdvertiseAddr = ""
	mc.AdvertisePort = bindPort
	if c.AdvertiseAddr != "" {
		advIP, advPort, _ := parseIPPort(c.AdvertiseAddr)
		mc.AdvertiseAddr = advIP.String()
		if advPort != 0 {
			mc.AdvertisePort = advPort
		}
	}
	return mc
}
