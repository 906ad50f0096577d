package plan_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/plan"
	"github.com/sluice-rl/sluice/node"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

func near(got, want float64) bool {
	return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))
}

func TestCompute(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name string
		in   plan.Input
		// want
		keysPerNode, memory, limit, cores, forwarded, netBytes, grantRPCs float64
	}{
		{
			name: "one node holds everything and forwards nothing",
			in:   plan.Input{RPS: 100_000, Keys: 10_000_000, Nodes: 1},
			// 26.8 MiB + 10M × 39.4 B; the cap needs 10M × 40 B / 0.5.
			keysPerNode: 10_000_000, memory: 26.8*mib + 394_000_000, limit: 800_000_000,
			cores: 0.7,
		},
		{
			name:        "three nodes, unrouted callers: 2/3 forwarded",
			in:          plan.Input{RPS: 90_000, Keys: 3_000_000, Nodes: 3},
			keysPerNode: 1_000_000, memory: 26.8*mib + 39_400_000, limit: 80_000_000,
			cores:     (90_000*0.7/100_000 + 60_000*0.11*51e-6*1.5) / 3,
			forwarded: 60_000, netBytes: 60_000 * 109,
		},
		{
			name:        "a replica doubles the keys a node holds",
			in:          plan.Input{RPS: 1, Keys: 30_000_000, Nodes: 3, Replicas: 1},
			keysPerNode: 20_000_000, memory: 26.8*mib + 788_000_000, limit: 1_600_000_000,
			cores:     (0.7/100_000 + 2.0/3*0.11*51e-6*1.5) / 3,
			forwarded: 2.0 / 3, netBytes: 2.0 / 3 * 109,
		},
		{
			name:        "routed by the Go client: nothing forwarded",
			in:          plan.Input{RPS: 100_000, Keys: 3, Nodes: 3, RoutedShare: 1},
			keysPerNode: 1, memory: 26.8*mib + 39.4, limit: 26.8*mib + 39.4,
			cores: 0.7 / 3,
		},
		{
			name:        "half the forwarded checks on hot keys with grants",
			in:          plan.Input{RPS: 300_000, Keys: 3, Nodes: 4, GrantShare: 0.5},
			keysPerNode: 0.75, memory: 26.8*mib + 0.75*39.4, limit: 26.8*mib + 0.75*39.4,
			// 3/4 of 300,000 reach a node other than the owner; half of
			// them forwarded, half answered from grants.
			cores:     (300_000*0.7/100_000 + 112_500*0.11*51e-6*1.5) / 4,
			forwarded: 112_500, netBytes: 112_500 * 109,
			grantRPCs: 112_500 * 0.0047 * 1.5,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := plan.Compute(c.in)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []struct {
				name      string
				got, want float64
			}{
				{"KeysPerNode", e.KeysPerNode, c.keysPerNode},
				{"MemoryBytes", e.MemoryBytes, c.memory},
				{"StoreBytes", e.StoreBytes, c.keysPerNode * 40},
				{"MemoryLimitBytes", e.MemoryLimitBytes, c.limit},
				{"CPUCores", e.CPUCores, c.cores},
				{"ForwardedPerSec", e.ForwardedPerSec, c.forwarded},
				{"NetworkBytesPerSec", e.NetworkBytesPerSec, c.netBytes},
				{"GrantRPCsPerSec", e.GrantRPCsPerSec, c.grantRPCs},
				{"GrantBytesPerSec", e.GrantBytesPerSec, c.grantRPCs * plan.GrantRPCBytes},
			} {
				if !near(f.got, f.want) {
					t.Errorf("%s = %v, want %v", f.name, f.got, f.want)
				}
			}
		})
	}
}

func TestComputeBadInput(t *testing.T) {
	ok := plan.Input{RPS: 1000, Keys: 1000, Nodes: 3}
	cases := []struct {
		name  string
		edit  func(*plan.Input)
		field string
	}{
		{"zero rps", func(in *plan.Input) { in.RPS = 0 }, "rps"},
		{"negative rps", func(in *plan.Input) { in.RPS = -5 }, "rps"},
		{"NaN rps", func(in *plan.Input) { in.RPS = math.NaN() }, "rps"},
		{"infinite rps", func(in *plan.Input) { in.RPS = math.Inf(1) }, "rps"},
		{"absurd rps", func(in *plan.Input) { in.RPS = 1e11 }, "rps"},
		{"zero keys", func(in *plan.Input) { in.Keys = 0 }, "keys"},
		{"negative keys", func(in *plan.Input) { in.Keys = -1 }, "keys"},
		{"fractional keys", func(in *plan.Input) { in.Keys = 10.5 }, "keys"},
		{"absurd keys", func(in *plan.Input) { in.Keys = 1e13 }, "keys"},
		{"zero nodes", func(in *plan.Input) { in.Nodes = 0 }, "nodes"},
		{"negative nodes", func(in *plan.Input) { in.Nodes = -3 }, "nodes"},
		{"absurd nodes", func(in *plan.Input) { in.Nodes = 10_001 }, "nodes"},
		{"negative replicas", func(in *plan.Input) { in.Replicas = -1 }, "replicas"},
		{"absurd replicas", func(in *plan.Input) { in.Nodes, in.Replicas = 100, 11 }, "replicas"},
		{"replicas without the nodes", func(in *plan.Input) { in.Replicas = 3 }, "replicas"},
		{"routed share above 1", func(in *plan.Input) { in.RoutedShare = 1.5 }, "routed-share"},
		{"negative grant share", func(in *plan.Input) { in.GrantShare = -0.1 }, "grant-share"},
	}
	if _, err := plan.Compute(ok); err != nil {
		t.Fatalf("the valid input: %v", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := ok
			c.edit(&in)
			_, err := plan.Compute(in)
			var ie *plan.InputError
			if !errors.As(err, &ie) || ie.Field != c.field {
				t.Fatalf("err = %v, want an InputError of field %q", err, c.field)
			}
		})
	}
}

// TestConstantsAgree checks the constants that restate code or message
// sizes: the store's memory share, and the bytes of a forwarded check and
// of a grant RPC, from the peer protocol's encoded messages.
func TestConstantsAgree(t *testing.T) {
	if plan.StoreMemoryShare != node.StoreMemoryShare {
		t.Errorf("StoreMemoryShare %v, node's %v", plan.StoreMemoryShare, node.StoreMemoryShare)
	}
	// gRPC's length prefix and an HTTP/2 DATA frame's header, per message.
	const framing = 5 + 9
	wire := func(upTo bool, granted int64) int {
		item := &sluicev1.PeerItem{
			Hash:  0xfedcba9876543210,
			Limit: &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Limit: 100, PeriodNs: int64(time.Second), Burst: 200},
			Cost:  1,
			UpTo:  upTo,
		}
		if upTo {
			item.Cost = granted
		}
		req := &sluicev1.PeerCheckStreamRequest{Id: 1 << 20, Request: &sluicev1.PeerCheckRequest{
			From: "sluice-0", Items: []*sluicev1.PeerItem{item}, TimeoutNs: int64(500 * time.Millisecond),
		}}
		res := &sluicev1.PeerResult{Allowed: true, Limit: 100, Remaining: 150, ResetAfterNs: int64(500 * time.Millisecond), Granted: granted}
		resp := &sluicev1.PeerCheckStreamResponse{Id: 1 << 20, Response: &sluicev1.PeerCheckResponse{
			Owner: "sluice-1", Results: []*sluicev1.PeerResult{res},
		}}
		return req.SizeVT() + resp.SizeVT() + 2*framing
	}
	if got := wire(false, 0); got != plan.ForwardedCheckBytes {
		t.Errorf("a forwarded check is %d bytes on the wire, ForwardedCheckBytes %d", got, plan.ForwardedCheckBytes)
	}
	if got := wire(true, 1000); got != plan.GrantRPCBytes {
		t.Errorf("a grant RPC of 1,000 units is %d bytes on the wire, GrantRPCBytes %d", got, plan.GrantRPCBytes)
	}
}

// The memory constants are the figures measured in scenario (e) of
// docs/benchmarks.md (one node, 10M keys, `sluice serve`'s GC settings),
// and docs/capacity.md states them: a new `make bench-compare` that moves
// the figure fails here until the constant follows.
func TestMemoryConstantsAreMeasured(t *testing.T) {
	b, err := os.ReadFile("../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| Sluice \(1 node\) \| 10,000,000 \| [^|]+ \| ([0-9.]+) MiB \| [0-9.]+ MiB \| ([0-9.]+) \|`).FindSubmatch(b)
	if row == nil {
		t.Fatal("docs/benchmarks.md: no scenario (e) row for Sluice (1 node)")
	}
	before, _ := strconv.ParseFloat(string(row[1]), 64)
	perKey, _ := strconv.ParseFloat(string(row[2]), 64)
	if plan.NodeBytesPerKey != perKey || plan.NodeBaseBytes != before*(1<<20) {
		t.Errorf("NodeBytesPerKey %v, NodeBaseBytes %v MiB; docs/benchmarks.md (e) measured %v B/key, %v MiB before",
			plan.NodeBytesPerKey, plan.NodeBaseBytes/(1<<20), perKey, before)
	}
	c, err := os.ReadFile("../../docs/capacity.md")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%.1f MiB + *k* × %.1f B", plan.NodeBaseBytes/(1<<20), plan.NodeBytesPerKey)
	if !strings.Contains(string(c), want) {
		t.Errorf("docs/capacity.md lacks %q", want)
	}
}
