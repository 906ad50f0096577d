// Package plan is the capacity estimate of `sluice plan`: from a cluster's
// checks per second and live keys, the memory, CPU and node-to-node
// network of each node. It is a pure function of its Input and the
// measured constants below, each named with the figure of
// docs/benchmarks.md it comes from; docs/capacity.md gives the formula.
// It imports nothing of ours.
package plan

import (
	"fmt"
	"math"
)

// Measured constants (docs/benchmarks.md, 2-core AMD EPYC, Go 1.26.8).
// plan_test.go checks that NodeBaseBytes and NodeBytesPerKey are the
// figures of scenario (e) in docs/benchmarks.md.
const (
	// NodeBaseBytes is a node's RSS before it holds any key: scenario (e)
	// of `make bench-compare` (2026-12-05), "RSS before" of a fresh
	// single `sluice serve`, 26.8 MiB.
	NodeBaseBytes = 26.8 * (1 << 20)
	// NodeBytesPerKey is a node's RSS per stored key with `sluice
	// serve`'s GC settings (--gc-percent 25 once the live heap passes
	// 256 MiB; GOGC and GOMEMLIMIT unset): scenario (e) of `make
	// bench-compare` (2026-12-05), one node filled with 10,000,000
	// token-bucket keys, RSS 26.8 -> 403.0 MiB, 39.4 B/key (the store's
	// maps ~31 B/key of live heap, the rest garbage and free heap between
	// collections: docs/benchmarks.md, "node: 10M keys, where the RSS
	// goes").
	NodeBytesPerKey = 39.4
	// StoreEstimateBytesPerKey is what the store's memory cap counts per
	// key: "store: 10M keys on one node", "the store's own estimate (for
	// the memory cap)", 40 B/key.
	StoreEstimateBytesPerKey = 40.0
	// StoreMemoryShare is the share of the memory limit that the store's
	// cap defaults to (node.StoreMemoryShare; the test checks they agree).
	StoreMemoryShare = 0.5
	// NodeCPUPerCheck is the nodes' CPU per check answered by its owner,
	// in seconds: (d) open loop at 100,000 checks/s, 3 nodes, checks
	// routed to their owners by the Go client: "the three nodes about
	// 0.7" cores of the 17.83 CPU s per 1M checks (the load generator and
	// the client took the other 1.1). (b), 64 callers, gives 17.15 CPU s
	// per 1M for nodes and client together, the same split.
	NodeCPUPerCheck = 0.7 / 100_000
	// ForwardCPUPerCheck is the extra CPU, in seconds, of a check that
	// its first node forwards to the owner, both sides together: the RLS
	// profile of (g) ("Reading the RLS comparison"): forwarding the two
	// thirds of descriptors another node owns is 6% of a node's CPU and
	// the owner's side of those forwards about 5%, of a call costing
	// 45-57 µs of server CPU: 11% × 51 µs / (2/3) = 8.4 µs. Derived from a
	// profile, not measured on its own.
	ForwardCPUPerCheck = 0.11 * 51e-6 / (2.0 / 3)
	// ForwardedCheckBytes is the bytes on the wire, both directions, of
	// one forwarded check on the peer CheckStream, one item a message
	// ("cluster: 3 nodes on loopback": 1.01 items per batch at 8 callers,
	// 1.43 at 64): the protobuf sizes of PeerCheckStreamRequest (one
	// PeerItem: hash, a token-bucket limit of 100/s burst 200, cost 1;
	// from "sluice-0"; a 500 ms timeout) and PeerCheckStreamResponse (one
	// PeerResult, from "sluice-1"), each with gRPC's 5-byte prefix and a 9-byte HTTP/2
	// DATA frame header. Computed, not measured: plan_test.go encodes the
	// messages and checks it. TCP/IP and TLS headers are not counted.
	ForwardedCheckBytes = 109
	// GrantRPCsPerCheck is the peer RPCs per check of a hot key with
	// local grants on: "grants: one hot key", 0.0047 peer RPCs per check
	// (0.190 with grants off), one key of 10,000/s checked by 64 callers
	// over 3 nodes. It is the share of all checks, the owner's own
	// included.
	GrantRPCsPerCheck = 0.0047
	// GrantRPCBytes is the bytes of one grant RPC, both directions: a
	// forwarded check with up_to set, asking for 1,000 units and granted
	// them (ForwardedCheckBytes plus 2 for up_to, 1 for the larger cost and
	// 3 for granted). Computed as ForwardedCheckBytes is.
	GrantRPCBytes = ForwardedCheckBytes + 6
)

// Bounds of Input beyond which the estimate is refused as absurd.
const (
	MaxRPS      = 1e10 // checks per second, the whole cluster
	MaxKeys     = 1e12 // live keys
	MaxNodes    = 10_000
	MaxReplicas = 10
)

// Input is what the estimate needs. RPS and Keys are the whole cluster's.
type Input struct {
	RPS      float64 `json:"rps"`      // checks per second offered to the cluster
	Keys     float64 `json:"keys"`     // distinct keys live at once
	Nodes    int     `json:"nodes"`    // nodes in the cluster
	Replicas int     `json:"replicas"` // extra copies of each key's state to budget memory for
	// RoutedShare is the share of checks sent by a client that routes each
	// to its owner (the Go client): these are never forwarded. Envoy, HTTP
	// and unrouted gRPC callers reach any node, which forwards (N-1)/N of
	// their checks.
	RoutedShare float64 `json:"routed_share"`
	// GrantShare is the share of the forwarded checks that are on keys hot
	// enough for local token grants: answered by their first node, they
	// cost grant RPCs (GrantRPCsPerCheck) instead of forwards.
	GrantShare float64 `json:"grant_share"`
}

// Estimate is the capacity of each node, and the cluster's node-to-node
// traffic.
type Estimate struct {
	Input Input `json:"input"`
	// KeysPerNode is Keys/Nodes × (1+Replicas).
	KeysPerNode float64 `json:"keys_per_node"`
	// MemoryBytes is a node's expected RSS: NodeBaseBytes + KeysPerNode ×
	// NodeBytesPerKey.
	MemoryBytes float64 `json:"memory_bytes_per_node"`
	// StoreBytes is what the store's memory cap counts for KeysPerNode,
	// and MemoryLimitBytes the container memory limit whose default store
	// cap (StoreMemoryShare of it) holds them, or MemoryBytes if larger.
	StoreBytes       float64 `json:"store_bytes_per_node"`
	MemoryLimitBytes float64 `json:"memory_limit_bytes_per_node"`
	// CPUCores is a node's busy CPU, at 100% use of what it is given.
	CPUCores float64 `json:"cpu_cores_per_node"`
	// ForwardedPerSec is the checks/s the cluster's nodes forward to their
	// owners; NetworkBytesPerSec their bytes/s, both directions, summed
	// over the cluster (each node sends and receives about 1/N of it).
	ForwardedPerSec    float64 `json:"forwarded_checks_per_sec"`
	NetworkBytesPerSec float64 `json:"forward_bytes_per_sec"`
	// GrantRPCsPerSec and GrantBytesPerSec are the cluster's grant
	// traffic.
	GrantRPCsPerSec  float64 `json:"grant_rpcs_per_sec"`
	GrantBytesPerSec float64 `json:"grant_bytes_per_sec"`
}

// InputError is an invalid Input field: Field is the flag's name.
type InputError struct {
	Field, Msg string
}

func (e *InputError) Error() string { return "--" + e.Field + ": " + e.Msg }

// Validate returns an *InputError for the first invalid field.
func (in Input) Validate() error {
	bad := func(f, format string, a ...any) error { return &InputError{f, fmt.Sprintf(format, a...)} }
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !finite(in.RPS) || in.RPS <= 0:
		return bad("rps", "must be a number of checks per second above 0, got %v", in.RPS)
	case in.RPS > MaxRPS:
		return bad("rps", "%v is more than %g checks per second", in.RPS, float64(MaxRPS))
	case !finite(in.Keys) || in.Keys < 1:
		return bad("keys", "must be a number of keys of at least 1, got %v", in.Keys)
	case in.Keys > MaxKeys:
		return bad("keys", "%v is more than %g keys", in.Keys, float64(MaxKeys))
	case in.Keys != math.Trunc(in.Keys):
		return bad("keys", "must be a whole number, got %v", in.Keys)
	case in.Nodes < 1 || in.Nodes > MaxNodes:
		return bad("nodes", "must be from 1 to %d, got %d", MaxNodes, in.Nodes)
	case in.Replicas < 0 || in.Replicas > MaxReplicas:
		return bad("replicas", "must be from 0 to %d, got %d", MaxReplicas, in.Replicas)
	case in.Replicas >= in.Nodes:
		return bad("replicas", "%d extra copies need more than %d nodes", in.Replicas, in.Nodes)
	case !finite(in.RoutedShare) || in.RoutedShare < 0 || in.RoutedShare > 1:
		return bad("routed-share", "must be from 0 to 1, got %v", in.RoutedShare)
	case !finite(in.GrantShare) || in.GrantShare < 0 || in.GrantShare > 1:
		return bad("grant-share", "must be from 0 to 1, got %v", in.GrantShare)
	}
	return nil
}

// Compute validates in and estimates its capacity.
func Compute(in Input) (Estimate, error) {
	if err := in.Validate(); err != nil {
		return Estimate{}, err
	}
	n := float64(in.Nodes)
	e := Estimate{Input: in}
	e.KeysPerNode = in.Keys / n * float64(1+in.Replicas)
	e.MemoryBytes = NodeBaseBytes + e.KeysPerNode*NodeBytesPerKey
	e.StoreBytes = e.KeysPerNode * StoreEstimateBytesPerKey
	e.MemoryLimitBytes = math.Max(e.StoreBytes/StoreMemoryShare, e.MemoryBytes)

	// Checks that reach a node other than their owner.
	offOwner := in.RPS * (1 - in.RoutedShare) * (n - 1) / n
	e.ForwardedPerSec = offOwner * (1 - in.GrantShare)
	e.NetworkBytesPerSec = e.ForwardedPerSec * ForwardedCheckBytes
	// GrantRPCsPerCheck counts all of a hot key's checks, the owner's own
	// included: measured over 3 nodes, it is per off-owner check 3/2 of it.
	if in.Nodes > 1 {
		e.GrantRPCsPerSec = offOwner * in.GrantShare * GrantRPCsPerCheck * 3 / 2
	}
	e.GrantBytesPerSec = e.GrantRPCsPerSec * GrantRPCBytes
	e.CPUCores = (in.RPS*NodeCPUPerCheck + e.ForwardedPerSec*ForwardCPUPerCheck) / n
	return e, nil
}
