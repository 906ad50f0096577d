package epoch

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Errors of the package. Each is wrapped with %w where it is returned.
var (
	// ErrInvalidConfig is wrapped by every *ConfigError New returns.
	ErrInvalidConfig = errors.New("epoch: invalid config")
	// ErrBadRecord is wrapped by every error DecodeRecord returns.
	ErrBadRecord = errors.New("epoch: bad record")
	// ErrStopped is returned by Run when it is called twice.
	ErrStopped = errors.New("epoch: node already ran")
)

// Defaults, used for zero fields of Config.
const (
	DefaultTickInterval   = 100 * time.Millisecond
	DefaultElectionTicks  = 10
	DefaultHeartbeatTicks = 1
	DefaultMaxVoters      = 5
	DefaultMaxClockDrift  = 0.1
	DefaultInbox          = 4096
)

// Config configures a Node. Zero fields take the defaults above; LANConfig
// and FastConfig are the presets.
type Config struct {
	// Name is this node's name, its memberlist name and its name on the
	// ring. Required.
	Name string
	// GRPCAddr is where this node serves its peers (host:port), carried in
	// its ring.Member. Required.
	GRPCAddr string
	// TickInterval is the period of Raft's logical clock: Run ticks once
	// per interval. Default 100ms.
	TickInterval time.Duration
	// ElectionTicks is Raft's election timeout in ticks: a follower that
	// heard no leader for this long (randomized up to twice as long)
	// campaigns, and a leader that heard no quorum for this long steps down
	// (CheckQuorum). Default 10. Must exceed HeartbeatTicks.
	ElectionTicks int
	// HeartbeatTicks is the leader's heartbeat period in ticks, also the
	// period of its lease rounds. Default 1.
	HeartbeatTicks int
	// MaxVoters caps the Raft voters; the other members are learners. The
	// voters are the largest odd number at most min(MaxVoters, members).
	// Default 5. Must be odd and at least 1.
	MaxVoters int
	// LeaseDuration is how long a lease lasts from its renewal (a follower:
	// receipt of its leader's heartbeat or append; the leader: the send time
	// of a heartbeat round a majority of voters acknowledged). Default: the
	// election timeout (ElectionTicks × TickInterval); at most three times
	// it. Longer than twice the election timeout (LANConfig), it outlasts
	// the election that follows a leader's loss; it lengthens DeadWait.
	LeaseDuration time.Duration
	// MaxClockDrift is the largest rate at which two nodes' clocks may
	// drift apart, as a fraction (0.1: 100ms per second). It stretches
	// DeadWait. Default 0.1. Must be in [0, 1).
	MaxClockDrift float64
	// BootstrapExpect is how many members (this node included) the gossip
	// view must show, none of them in a group, before the lowest-named of
	// them founds the group. 1, the default, is a node with no join list: a
	// group of one at once.
	BootstrapExpect int
	// Inbox bounds the messages Step queues for Run; beyond it Step drops
	// (Raft retries). Default 4096.
	Inbox int
	// Transport sends Raft messages to peers. Required by Run; a test that
	// drives the node with Tick, Step and SetView reads Outbox instead.
	Transport Transport
	// OnEpoch, if set, receives each applied epoch, in order, one call at a
	// time, from the goroutine that drives the node (Run's, or the caller of
	// Tick, Step and SetView). It may call the Node's read methods.
	OnEpoch func(Epoch)
	// Clock returns the current time. Default time.Now.
	Clock func() time.Time
	// NewID returns a random non-zero 64-bit ID, for Raft IDs (one per
	// process start or reset) and group IDs. Default: crypto/rand.
	NewID func() uint64
}

// LANConfig returns a Config for a deployment on one network: 25ms ticks,
// election timeout 500ms (randomized by Raft over 500ms-1s, in 20 steps),
// heartbeats every 100ms, leases of 1.3s. A lease outlasts the election
// that follows the loss of a leader (at most twice the election timeout,
// plus a heartbeat), so the majority keeps deciding as owners through it
// (TestLeaderLossKeepsTheMajorityLeased); DeadWait is 1.98s.
func LANConfig(name, grpcAddr string) Config {
	return Config{Name: name, GRPCAddr: grpcAddr, TickInterval: 25 * time.Millisecond,
		ElectionTicks: 20, HeartbeatTicks: 4, LeaseDuration: 1300 * time.Millisecond, MaxVoters: DefaultMaxVoters}
}

// FastConfig returns a Config for tests and one-host clusters: 10ms ticks,
// election timeout 100ms, leases of 100ms.
func FastConfig(name, grpcAddr string) Config {
	return Config{Name: name, GRPCAddr: grpcAddr, TickInterval: 10 * time.Millisecond,
		ElectionTicks: 10, HeartbeatTicks: 1, LeaseDuration: 100 * time.Millisecond, MaxVoters: DefaultMaxVoters}
}

// ConfigError reports an invalid Config field. It wraps ErrInvalidConfig
// and reads "epoch: invalid config: Field: reason".
type ConfigError struct {
	// Field names the field, as in the Config struct.
	Field string
	// Reason says what is wrong with it.
	Reason string
}

func (e *ConfigError) Error() string {
	return ErrInvalidConfig.Error() + ": " + e.Field + ": " + e.Reason
}

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// ElectionTimeout is ElectionTicks × TickInterval.
func (c Config) ElectionTimeout() time.Duration {
	return time.Duration(c.ElectionTicks) * c.TickInterval
}

// DeadWait is how long a new owner waits, after applying a Dead epoch,
// before it decides the dead node's keys: by then the dead node's lease
// has expired on its own clock, whatever it last heard (see the package
// doc): (ElectionTimeout + LeaseDuration) × (1 + MaxClockDrift).
func (c Config) DeadWait() time.Duration {
	c = c.withDefaults()
	return time.Duration(float64(c.ElectionTimeout()+c.LeaseDuration) * (1 + c.MaxClockDrift))
}

func (c Config) withDefaults() Config {
	if c.TickInterval == 0 {
		c.TickInterval = DefaultTickInterval
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = DefaultElectionTicks
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = DefaultHeartbeatTicks
	}
	if c.MaxVoters == 0 {
		c.MaxVoters = DefaultMaxVoters
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = c.ElectionTimeout()
	}
	if c.MaxClockDrift == 0 {
		c.MaxClockDrift = DefaultMaxClockDrift
	}
	if c.BootstrapExpect == 0 {
		c.BootstrapExpect = 1
	}
	if c.Inbox == 0 {
		c.Inbox = DefaultInbox
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.NewID == nil {
		c.NewID = randomID
	}
	return c
}

// validate checks every field (after withDefaults) and returns all
// problems found, each a *ConfigError naming its field, or nil.
func (c Config) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if c.Name == "" {
		bad("Name", "is required")
	} else if len(c.Name) > maxString {
		bad("Name", "is %d bytes, at most %d", len(c.Name), maxString)
	}
	if c.GRPCAddr == "" {
		bad("GRPCAddr", "is required")
	} else if len(c.GRPCAddr) > maxString {
		bad("GRPCAddr", "is %d bytes, at most %d", len(c.GRPCAddr), maxString)
	}
	if c.TickInterval < 0 {
		bad("TickInterval", "is %v, must be positive", c.TickInterval)
	}
	if c.HeartbeatTicks < 0 {
		bad("HeartbeatTicks", "is %d, must be positive", c.HeartbeatTicks)
	}
	if c.ElectionTicks <= c.HeartbeatTicks {
		bad("ElectionTicks", "is %d, must exceed HeartbeatTicks (%d)", c.ElectionTicks, c.HeartbeatTicks)
	}
	if c.MaxVoters < 1 || c.MaxVoters%2 == 0 {
		bad("MaxVoters", "is %d, must be odd and at least 1", c.MaxVoters)
	}
	if c.LeaseDuration < 0 || c.LeaseDuration > 3*c.ElectionTimeout() {
		bad("LeaseDuration", "is %v, must be positive and at most three times the election timeout (%v)", c.LeaseDuration, c.ElectionTimeout())
	}
	if c.MaxClockDrift < 0 || c.MaxClockDrift >= 1 {
		bad("MaxClockDrift", "is %v, must be in [0, 1)", c.MaxClockDrift)
	}
	if c.BootstrapExpect < 1 {
		bad("BootstrapExpect", "is %d, must be at least 1", c.BootstrapExpect)
	}
	if c.Inbox < 0 {
		bad("Inbox", "is %d, must be positive", c.Inbox)
	}
	return errors.Join(errs...)
}

func randomID() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}
